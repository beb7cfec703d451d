// Communicators: the registry of live handles, creation (the rendezvous is the shared segment's
// join), and the lifecycle entry points of NCCL's API.
#include "communicator.hpp"

#include <sys/random.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "simcuda/core.hpp"
#include "status.hpp"

namespace simcuda::nccl {

namespace {

std::mutex registry_mutex;
std::set<const ncclComm*>& registry() {
  static auto* live = new std::set<const ncclComm*>;  // outlives static destruction: atexit-safe
  return *live;
}

constexpr char id_magic[8] = {'s', 'i', 'm', 'n', 'c', 'c', 'l', '1'};

std::string to_hex(const unsigned char* bytes, std::size_t n) {
  std::string out;
  char two[3];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(two, sizeof two, "%02x", bytes[i]);
    out += two;
  }
  return out;
}

std::uint64_t fnv1a(const std::string& text, std::uint64_t seed) {
  std::uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::string child_name(const std::string& parent, std::uint32_t split, int color) {
  std::string key = parent + "/" + std::to_string(split) + "/" + std::to_string(color);
  char name[64];
  std::snprintf(name, sizeof name, "/simcuda-nccl-%016llx%016llx", static_cast<unsigned long long>(fnv1a(key, 1)),
                static_cast<unsigned long long>(fnv1a(key, 2)));
  return name;
}

ncclResult_t create_communicator(const std::string& name, int nranks, int rank, bool blocking, ncclComm** out,
                                 const char* function) {
  auto comm = std::make_unique<ncclComm>();
  comm->name = name;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = current_device();
  comm->blocking = blocking;
  mark_device_active(comm->device);
  comm->virtual_peers = current_config().nccl_virtual_peers;
  if (comm->virtual_peers) {
    // Nobody to meet: the communicator is complete with this rank alone (Note [virtual peers]).
    if (nranks < 1) return fail(ncclInvalidArgument, function, "nranks %d is below 1", nranks);
    if (rank < 0 || rank >= nranks)
      return fail(ncclInvalidArgument, function, "rank %d is outside 0..%d", rank, nranks - 1);
  } else {
    // The ranks' GPUs are the machine's (each rank's ordinal may be 0 under CUDA_VISIBLE_DEVICES).
    const int gpu = machine_device(comm->device);
    if (ncclResult_t r = comm->shared.join(name, nranks, rank, gpu, function); r != ncclSuccess) return r;
    // NCCL refuses two ranks on one GPU ("Duplicate GPU detected").
    for (int r = 0; r < nranks; ++r)
      if (r != rank && comm->shared.header().device[r] == gpu)
        return fail(ncclInvalidUsage, function, "duplicate GPU detected: rank %d and rank %d both use GPU %d", rank, r,
                    gpu);
  }
  comm->memory = std::make_unique<comm_memory>(comm->device, nranks);
  if (!sizing().runtime_connect && !comm->memory->connect_ring())
    return fail(ncclUnhandledCudaError, function, "out of memory on device %d for the connection buffers",
                comm->device);
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry().insert(comm.get());
  }
  *out = comm.release();
  return ncclSuccess;
}

ncclResult_t check_comm(const ncclComm* comm, const char* function) {
  if (comm == nullptr) return fail(ncclInvalidArgument, function, "comm argument is NULL");
  std::lock_guard<std::mutex> lock(registry_mutex);
  if (registry().count(comm) == 0)
    return fail(ncclInvalidArgument, function, "comm %p is not a live communicator (destroyed, or never created)",
                static_cast<const void*>(comm));
  return ncclSuccess;
}

ncclResult_t check_comm_usable(const ncclComm* comm, const char* function) {
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  if (comm->status == ncclComm::state::finalized)
    return fail(ncclInvalidUsage, function, "the communicator was finalized (ncclCommFinalize)");
  if (comm->memory->suspended())
    return fail(ncclInvalidUsage, function, "the communicator is suspended (ncclCommSuspend): resume it first");
  return ncclSuccess;
}

void retire_communicator(ncclComm* comm) {
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry().erase(comm);
  }
  delete comm;
}

}  // namespace simcuda::nccl

using namespace simcuda::nccl;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion", "version argument is NULL");
  *version = 22907;  // NCCL_VERSION(2, 29, 7): the API level emulated (suspend/resume included)
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId", "uniqueId argument is NULL");
  unsigned char random[16];
  if (getrandom(random, sizeof random, 0) != static_cast<ssize_t>(sizeof random))
    return fail(ncclSystemError, "ncclGetUniqueId", "getrandom failed");
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, id_magic, sizeof id_magic);
  std::string name = "/simcuda-nccl-" + to_hex(random, sizeof random);
  std::memcpy(id->internal + sizeof id_magic, name.c_str(), name.size());
  return ncclSuccess;
}

}  // extern "C"

namespace {

ncclResult_t init_rank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank,
                       const simcuda_nccl_config_head* config, const char* function) {
  if (comm == nullptr) return fail(ncclInvalidArgument, function, "comm argument is NULL");
  *comm = nullptr;
  // With virtual peers the id names nothing (a rank that is not its communicator's rank 0 reads it
  // from a store its absent rank 0 never wrote: the dry run's store answers zeros).
  if (!simcuda::current_config().nccl_virtual_peers && std::memcmp(id.internal, id_magic, sizeof id_magic) != 0)
    return fail(ncclInvalidArgument, function, "the unique id was not made by ncclGetUniqueId of the simulated NCCL");
  bool blocking = true;
  if (config != nullptr) {
    if (config->magic != SIMCUDA_NCCL_CONFIG_MAGIC)
      return fail(ncclInvalidArgument, function, "config was not initialised with NCCL_CONFIG_INITIALIZER (magic %#x)",
                  config->magic);
    if (config->size >= sizeof(simcuda_nccl_config_head) && config->blocking == 0) blocking = false;
  }
  std::string name(id.internal + sizeof id_magic,
                   strnlen(id.internal + sizeof id_magic, sizeof id.internal - sizeof id_magic));
  return create_communicator(name, nranks, rank, blocking, comm, function);
}

}  // namespace

extern "C" {

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return init_rank(comm, nranks, id, rank, nullptr, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    simcuda_nccl_config_head* config) {
  return init_rank(comm, nranks, id, rank, config, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int id_count, ncclUniqueId* ids,
                                      simcuda_nccl_config_head* config) {
  if (id_count < 1 || ids == nullptr)
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable", "needs at least one unique id (got %d)", id_count);
  // Every id names the same job; the first one is the rendezvous.
  return init_rank(comm, nranks, ids[0], rank, config, "ncclCommInitRankScalable");
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, simcuda_nccl_config_head* config) {
  const char* function = "ncclCommSplit";
  if (ncclResult_t r = check_comm_usable(comm, function); r != ncclSuccess) return r;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, function, "newcomm argument is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != SIMCUDA_NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, function, "color %d is negative (and not NCCL_SPLIT_NOCOLOR)", color);
  if (config != nullptr && config->magic != SIMCUDA_NCCL_CONFIG_MAGIC)
    return fail(ncclInvalidArgument, function, "config was not initialised with NCCL_CONFIG_INITIALIZER");
  if (comm->virtual_peers)
    return fail(ncclInvalidUsage, function,
                "with virtual peers (nccl_peers:virtual) a split cannot know the absent ranks' colors, so not the "
                "child's size: make the group with its own unique id (torch: init_process_group without device_id)");
  segment_header& h = comm->shared.header();
  h.split_color[comm->rank] = color;
  h.split_key[comm->rank] = key;
  if (ncclResult_t r = comm->shared.barrier(function); r != ncclSuccess) return r;
  // The new ranks: same color, ordered by key, then by rank in the parent.
  int new_rank = 0;
  int new_nranks = 0;
  for (int r = 0; r < comm->nranks; ++r) {
    if (h.split_color[r] != color) continue;
    ++new_nranks;
    if (h.split_key[r] < key || (h.split_key[r] == key && r < comm->rank)) ++new_rank;
  }
  // Nobody may write the next split's colors before everyone has read these.
  if (ncclResult_t r = comm->shared.barrier(function); r != ncclSuccess) return r;
  std::uint32_t split = comm->splits++;
  if (color == SIMCUDA_NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  bool blocking = config == nullptr || config->size < sizeof(simcuda_nccl_config_head) || config->blocking != 0;
  return create_communicator(child_name(comm->name, split, color), new_nranks, new_rank, blocking, newcomm, function);
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int exclude_count, ncclComm_t* newcomm,
                            simcuda_nccl_config_head* config, int /*flags*/) {
  // Called by the ranks that remain (the excluded ones may be gone): no exchange through the
  // parent, every remaining rank derives the same child from the list. NCCL_SHRINK_ABORT needs
  // nothing more here: no operation of the parent is outstanding when the call is made.
  const char* function = "ncclCommShrink";
  if (ncclResult_t r = check_comm(comm, function); r != ncclSuccess) return r;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, function, "newcomm argument is NULL");
  *newcomm = nullptr;
  if (exclude_count < 0 || (exclude_count > 0 && exclude == nullptr))
    return fail(ncclInvalidArgument, function, "excludeRanksList of %d ranks is NULL or negative", exclude_count);
  if (config != nullptr && config->magic != SIMCUDA_NCCL_CONFIG_MAGIC)
    return fail(ncclInvalidArgument, function, "config was not initialised with NCCL_CONFIG_INITIALIZER");
  std::vector<bool> excluded(static_cast<std::size_t>(comm->nranks), false);
  for (int i = 0; i < exclude_count; ++i) {
    int r = exclude[i];
    if (r < 0 || r >= comm->nranks || excluded[static_cast<std::size_t>(r)])
      return fail(ncclInvalidArgument, function, "excluded rank %d is outside 0..%d or listed twice", r,
                  comm->nranks - 1);
    excluded[static_cast<std::size_t>(r)] = true;
  }
  if (excluded[static_cast<std::size_t>(comm->rank)])
    return fail(ncclInvalidArgument, function, "rank %d is in its own excludeRanksList", comm->rank);
  int new_rank = 0;
  for (int r = 0; r < comm->rank; ++r) new_rank += excluded[static_cast<std::size_t>(r)] ? 0 : 1;
  // A color no split can use names the child.
  constexpr int shrink_color = -2;
  std::uint32_t split = comm->splits++;
  bool blocking = config == nullptr || config->size < sizeof(simcuda_nccl_config_head) || config->blocking != 0;
  return create_communicator(child_name(comm->name, split, shrink_color), comm->nranks - exclude_count, new_rank,
                             blocking, newcomm, function);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (ncclResult_t r = check_comm(comm, "ncclCommFinalize"); r != ncclSuccess) return r;
  // Work runs at the call, so nothing is outstanding: finalizing only closes the communicator.
  comm->status = ncclComm::state::finalized;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // NCCL accepts a NULL communicator here
  if (ncclResult_t r = check_comm(comm, "ncclCommDestroy"); r != ncclSuccess) return r;
  retire_communicator(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (ncclResult_t r = check_comm(comm, "ncclCommAbort"); r != ncclSuccess) return r;
  if (!comm->virtual_peers) comm->shared.abort();
  // An operation blocked in another thread sees the abort within a wait (2 ms) and returns.
  while (comm->in_flight.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  retire_communicator(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (ncclResult_t r = check_comm(comm, "ncclCommGetAsyncError"); r != ncclSuccess) return r;
  if (async_error == nullptr) return fail(ncclInvalidArgument, "ncclCommGetAsyncError", "asyncError argument is NULL");
  // Operations complete (or fail, returning their error) at the call: nothing fails later.
  *async_error = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (ncclResult_t r = check_comm(comm, "ncclCommCount"); r != ncclSuccess) return r;
  if (count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount", "count argument is NULL");
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (ncclResult_t r = check_comm(comm, "ncclCommCuDevice"); r != ncclSuccess) return r;
  if (device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice", "device argument is NULL");
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (ncclResult_t r = check_comm(comm, "ncclCommUserRank"); r != ncclSuccess) return r;
  if (rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank", "rank argument is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}

}  // extern "C"
