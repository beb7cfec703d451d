// SIMCUDA_BOOKS=PATTERN: at exit, each process writes what its simulated devices held to a JSON
// file named by PATTERN (%p: the pid, %%: '%'), for tools that run a job of several processes
// (phasealloc dryrun under torchrun) and need the device memory that no framework's allocator
// traced: NCCL's buffers, and the mapped peak.
//
// Rationale: a rank's process is gone when the tool reads its results; its allocator trace holds
//   only what went through the allocator. The simulator's books are the only place that knows the
//   rest, so they are written out when the process ends, and also whenever NCCL's peak grows
//   (communicators are made and their buffers taken a few times per job): Ray ends a job's workers
//   with SIGKILL, where no exit handler runs, and NCCL's buffers are what a tool needs most.
// Approach: when SIMCUDA_BOOKS is set at load, the configuration is read first and then an atexit
//   handler is registered, so the handler runs before the configuration's static is destroyed (the
//   books themselves are never destroyed). Only devices that held memory are written. The file is
//   written to a temporary name and renamed, so a reader never sees half of one.
//   {"pid": P, "rank": R|null, "local_rank": L|null, "capacity_bytes": C, "values": LEVEL,
//    "nccl_peers": "real"|"virtual", "devices": [{"device": D, "peak_mapped_bytes": M, "peak_nccl_bytes": N, "nccl_bytes_at_exit": X}]}
// Limitations: a process that ends without exit handlers (killed, _exit, os._exit) keeps the file
//   of NCCL's last new peak, if any: its peak_mapped_bytes is the peak up to then, and
//   nccl_bytes_at_exit what NCCL held then.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "simcuda/core.hpp"

namespace simcuda {

namespace {

std::string books_path(const char* pattern) {
  std::string out;
  for (const char* c = pattern; *c != '\0'; ++c) {
    if (c[0] == '%' && c[1] == 'p') {
      out += std::to_string(static_cast<long long>(getpid()));
      ++c;
    } else if (c[0] == '%' && c[1] == '%') {
      out += '%';
      ++c;
    } else {
      out += *c;
    }
  }
  return out;
}

/// An environment variable that is a non-negative integer, as JSON ("null" otherwise).
std::string env_integer(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return "null";
  for (const char* c = v; *c != '\0'; ++c)
    if (*c < '0' || *c > '9') return "null";
  return v;
}

void write_books() {
  try {
    write_books_file();
  } catch (...) {  // exiting: nothing more to do
  }
}

}  // namespace

void write_books_file() {
  const char* pattern = std::getenv("SIMCUDA_BOOKS");
  if (pattern == nullptr || *pattern == '\0') return;
  std::string devices;
  for (int d = 0; d < device_count(); ++d) {
    const std::size_t peak = peak_mapped_bytes(d);
    if (peak == 0) continue;
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s{\"device\": %d, \"peak_mapped_bytes\": %zu, \"peak_nccl_bytes\": %zu, "
                  "\"nccl_bytes_at_exit\": %zu}",
                  devices.empty() ? "" : ", ", d, peak, peak_nccl_bytes(d), nccl_bytes(d));
    devices += line;
  }
  if (devices.empty()) return;
  const std::string path = books_path(pattern);
  const std::string partial = path + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "simcuda: SIMCUDA_BOOKS: cannot write %s\n", partial.c_str());
    return;
  }
  std::fprintf(f,
               "{\"pid\": %lld, \"rank\": %s, \"local_rank\": %s, \"capacity_bytes\": %zu, \"values\": \"%s\", "
               "\"nccl_peers\": \"%s\", \"devices\": [%s]}\n",
               static_cast<long long>(getpid()), env_integer("RANK").c_str(), env_integer("LOCAL_RANK").c_str(),
               current_config().gpu.memory_bytes, value_level_name(current_config().values),
               current_config().nccl_virtual_peers ? "virtual" : "real", devices.c_str());
  const bool ok = std::fclose(f) == 0 && std::rename(partial.c_str(), path.c_str()) == 0;
  if (!ok) std::fprintf(stderr, "simcuda: SIMCUDA_BOOKS: cannot write %s\n", path.c_str());
}

namespace {

[[maybe_unused]] const bool registered = [] {
  const char* pattern = std::getenv("SIMCUDA_BOOKS");
  if (pattern == nullptr || *pattern == '\0') return false;
  (void)current_config();  // constructed before the handler is registered: destroyed after it runs
  return std::atexit(write_books) == 0;
}();

}  // namespace

}  // namespace simcuda
