// One rank's communicator (ncclComm_t): its place in the job, its shared memory, its device
// memory, the reduction operators made for it, and its registrations. Handles are checked against
// a registry, so a destroyed or foreign handle is an error value, never dereferenced.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "memory_model.hpp"
#include "nccl_types.hpp"
#include "segment.hpp"

struct ncclComm {
  enum class state { active, finalized };

  /// A pre-multiply-then-sum operator (ncclRedOpCreatePreMulSum).
  struct premul_op {
    bool live = false;
    ncclDataType_t type = ncclFloat32;
    bool on_device = false;  ///< ncclScalarDevice: read at each use
    double scalar = 0;       ///< ncclScalarHostImmediate: read at creation
    const void* device_scalar = nullptr;
  };

  std::string name;  ///< the shared-memory object's name (derived from the unique id)
  int rank = 0;
  int nranks = 0;
  int device = 0;
  bool blocking = true;
  state status = state::active;
  /// The other ranks are absent (nccl_peers:virtual): no shared segment; a collective answers as
  /// if every rank held this rank's values, staged in `staging` (Note [virtual peers]).
  bool virtual_peers = false;
  simcuda::nccl::segment shared;  ///< joined only when the peers are real
  std::vector<char> staging;      ///< two banks of one slot, made at the first collective that moves bytes
  std::unique_ptr<simcuda::nccl::comm_memory> memory;
  int bank = 0;              ///< the staging bank the next collective step writes
  std::uint32_t splits = 0;  ///< ncclCommSplit calls so far (names the children)
  std::vector<premul_op> premul_ops;
  std::map<std::uintptr_t, std::pair<void*, std::size_t>> registrations;  ///< handle -> (buffer, bytes)
  std::uintptr_t next_registration = 1;
  /// Operations running on this communicator now (ncclCommAbort from another thread waits for them
  /// to see the abort and return before the communicator is freed).
  std::atomic<int> in_flight{0};
};

namespace simcuda::nccl {

/// Joins (or creates) the communicator named `name` as `rank` of `nranks` on the calling thread's
/// current device. On success *out is a live handle.
ncclResult_t create_communicator(const std::string& name, int nranks, int rank, bool blocking, ncclComm** out,
                                 const char* function);

/// ncclSuccess when `comm` is a live handle; else the error, said with `function`'s name.
ncclResult_t check_comm(const ncclComm* comm, const char* function);
/// As check_comm, and the communicator still takes work (not finalized, not suspended).
ncclResult_t check_comm_usable(const ncclComm* comm, const char* function);

/// Forgets and frees a communicator (destroy, abort).
void retire_communicator(ncclComm* comm);

/// The object name of the child of `parent`'s split number `split` with `color`.
std::string child_name(const std::string& parent, std::uint32_t split, int color);

}  // namespace simcuda::nccl
