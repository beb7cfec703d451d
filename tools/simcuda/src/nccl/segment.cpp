// The communicator's shared memory, and the waits on it: futexes on words of a MAP_SHARED mapping,
// so ranks sleep instead of spinning (these machines have few cores and many ranks share them).
// Every wait wakes at least every few milliseconds to look for an abort or a peer that exited.
#include "segment.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "status.hpp"

namespace simcuda::nccl {

namespace {

constexpr std::size_t page_bytes = 4096;
constexpr std::size_t header_bytes = (sizeof(segment_header) + page_bytes - 1) / page_bytes * page_bytes;
constexpr std::size_t box_header_bytes = 64;

std::size_t boxes_offset() { return header_bytes; }
std::size_t box_data_offset(int nranks) {
  std::size_t headers = static_cast<std::size_t>(nranks) * nranks * box_header_bytes;
  return boxes_offset() + (headers + page_bytes - 1) / page_bytes * page_bytes;
}
std::size_t slots_offset(int nranks) {
  return box_data_offset(nranks) + static_cast<std::size_t>(nranks) * nranks * mailbox_bytes;
}
std::size_t segment_bytes(int nranks) {
  return slots_offset(nranks) + static_cast<std::size_t>(nranks) * 2 * slot_bytes;
}

std::uint32_t* word(std::atomic<std::uint32_t>& a) { return reinterpret_cast<std::uint32_t*>(&a); }

void futex_wait(std::atomic<std::uint32_t>& a, std::uint32_t seen, long timeout_ns) {
  timespec timeout{0, timeout_ns};
  syscall(SYS_futex, word(a), FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>& a) {
  syscall(SYS_futex, word(a), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// A process that exited, or a zombie its parent has not reaped yet.
bool process_gone(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return true;
  char line[512] = {};
  std::size_t n = std::fread(line, 1, sizeof line - 1, f);
  std::fclose(f);
  line[n] = '\0';
  const char* close = std::strrchr(line, ')');
  return close != nullptr && close[1] == ' ' && close[2] == 'Z';
}

}  // namespace

segment::~segment() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

ncclResult_t segment::join(const std::string& name, int nranks, int rank, int device, const char* function) {
  if (nranks < 1 || nranks > max_ranks)
    return fail(ncclInvalidArgument, function, "nranks %d is outside 1..%d (the simulator's limit)", nranks, max_ranks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, function, "rank %d is outside 0..%d", rank, nranks - 1);
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return fail(ncclSystemError, function, "shm_open(%s): %s", name.c_str(), std::strerror(errno));
  std::size_t bytes = segment_bytes(nranks);
  // Reserved, not only sized: a /dev/shm too small for it (a container's default 64 MiB) is an
  // error here, as NCCL's own shared-memory transport reports it, rather than a SIGBUS later.
  if (int error = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return fail(ncclSystemError, function,
                "cannot reserve %zu bytes of /dev/shm for the communicator (%s); in a container, /dev/shm may need to "
                "be larger (docker --shm-size)",
                bytes, std::strerror(error));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return fail(ncclSystemError, function, "mmap of %s: %s", name.c_str(), std::strerror(errno));
  base_ = static_cast<char*>(base);
  bytes_ = bytes;
  header_ = reinterpret_cast<segment_header*>(base_);
  rank_ = rank;
  nranks_ = nranks;

  std::int32_t expected = 0;
  // A rank that cannot join tells the others (they must not wait for it) and removes the name.
  auto give_up = [&] {
    abort();
    shm_unlink(name.c_str());
  };
  if (!header_->nranks.compare_exchange_strong(expected, nranks) && expected != nranks) {
    give_up();
    return fail(ncclInvalidUsage, function, "rank %d was given nranks %d, but another rank of this unique id gave %d",
                rank, nranks, expected);
  }
  std::int32_t no_pid = 0;
  if (!header_->pid[rank].compare_exchange_strong(no_pid, static_cast<std::int32_t>(getpid()))) {
    give_up();
    return fail(ncclInvalidUsage, function, "rank %d of this unique id was already taken (by pid %d)", rank, no_pid);
  }
  header_->device[rank] = device;
  std::uint32_t arrived = header_->joined.fetch_add(1) + 1;
  if (arrived == static_cast<std::uint32_t>(nranks)) futex_wake(header_->joined);

  auto start = std::chrono::steady_clock::now();
  bool said = false;
  for (;;) {
    std::uint32_t now = header_->joined.load();
    if (now >= static_cast<std::uint32_t>(nranks)) break;
    auto all_joined = [&] { return header_->joined.load() >= static_cast<std::uint32_t>(nranks); };
    if (ncclResult_t r = check_peers(function, all_joined); r != ncclSuccess) {  // an abort, or a rank that exited
      shm_unlink(name.c_str());
      return r;
    }
    if (!said && std::chrono::steady_clock::now() - start > std::chrono::seconds(30)) {
      std::fprintf(stderr, "simcuda: %s: %s: rank %d has waited 30 s for %u of %d ranks to join\n", library, function,
                   rank, static_cast<unsigned>(nranks) - now, nranks);
      said = true;
    }
    futex_wait(header_->joined, now, 2'000'000);
  }
  // Everyone has the object mapped: the name can go, so nothing is left behind in /dev/shm.
  if (rank == 0) shm_unlink(name.c_str());
  return ncclSuccess;
}

ncclResult_t segment::check_aborted(const char* function) {
  if (std::int32_t by = header_->aborted_by.load(); by != 0)
    return fail(ncclRemoteError, function, "rank %d aborted the communicator (ncclCommAbort, or it failed to join)",
                by - 1);
  return ncclSuccess;
}

bool segment::peer_gone(int rank) const {
  int pid = header_->pid[rank].load();
  return rank != rank_ && pid > 0 && process_gone(pid);
}

template <typename Finished>
ncclResult_t segment::check_peers(const char* function, Finished finished) {
  int gone = -1;
  for (int r = 0; r < nranks_ && gone < 0; ++r)
    if (peer_gone(r)) gone = r;
  if ((header_->aborted_by.load() == 0 && gone < 0) || finished()) return ncclSuccess;
  if (ncclResult_t r = check_aborted(function); r != ncclSuccess) return r;
  return fail(ncclRemoteError, function, "rank %d (pid %d) exited", gone, header_->pid[gone].load());
}

ncclResult_t segment::barrier(const char* function) {
  std::uint32_t generation = header_->barrier_generation.load();
  if (header_->barrier_arrived.fetch_add(1) + 1 == static_cast<std::uint32_t>(nranks_)) {
    header_->barrier_arrived.store(0);
    header_->barrier_generation.fetch_add(1);
    futex_wake(header_->barrier_generation);
    return ncclSuccess;
  }
  int spins = 0;
  while (header_->barrier_generation.load() == generation) {
    if (header_->aborted_by.load() != 0 || (++spins & 63) == 0)
      if (ncclResult_t r = check_peers(function, [&] { return header_->barrier_generation.load() != generation; });
          r != ncclSuccess)
        return r;
    futex_wait(header_->barrier_generation, generation, 2'000'000);
  }
  return ncclSuccess;
}

void segment::abort() noexcept {
  if (header_ == nullptr) return;
  std::int32_t none = 0;
  header_->aborted_by.compare_exchange_strong(none, rank_ + 1);
  futex_wake(header_->barrier_generation);
  futex_wake(header_->joined);
  for (int r = 0; r < nranks_; ++r) ring(r);
}

char* segment::slot(int rank, int bank) const noexcept {
  return base_ + slots_offset(nranks_) + (static_cast<std::size_t>(rank) * 2 + bank) * slot_bytes;
}

mailbox& segment::box(int from, int to) const noexcept {
  return *reinterpret_cast<mailbox*>(base_ + boxes_offset() +
                                     (static_cast<std::size_t>(from) * nranks_ + to) * box_header_bytes);
}

char* segment::box_data(int from, int to) const noexcept {
  return base_ + box_data_offset(nranks_) + (static_cast<std::size_t>(from) * nranks_ + to) * mailbox_bytes;
}

void segment::ring(int rank) noexcept {
  header_->doorbell[rank].fetch_add(1);
  futex_wake(header_->doorbell[rank]);
}

ncclResult_t segment::wait_doorbell(std::uint32_t seen, const char* function) {
  if (ncclResult_t r = check_aborted(function); r != ncclSuccess) return r;
  if (header_->doorbell[rank_].load() == seen) futex_wait(header_->doorbell[rank_], seen, 2'000'000);
  return ncclSuccess;
}

}  // namespace simcuda::nccl
