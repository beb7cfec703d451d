// Test support for the simulated NCCL: the entry points the tests call (declared here with the
// stand-in's ABI types, so no NCCL installation is needed), and run_ranks(), which forks one process
// per rank, as torchrun starts a job, and collects how each one ended.
#pragma once

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "nccl_types.hpp"

extern "C" {
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    simcuda_nccl_config_head* config);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, simcuda_nccl_config_head* config);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buffer, size_t bytes, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int count, ncclComm_t* newcomm,
                            simcuda_nccl_config_head* config, int flags);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags);
ncclResult_t ncclMemAlloc(void** pointer, size_t bytes);
ncclResult_t ncclMemFree(void* pointer);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, void* stream);
ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, void* stream);
ncclResult_t ncclBcast(void* buffer, size_t count, ncclDataType_t type, int root, ncclComm_t comm, void* stream);
ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           void* stream);
ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                           void* stream);
ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, void* stream);
ncclResult_t ncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                          void* stream);
ncclResult_t ncclGather(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                        void* stream);
ncclResult_t ncclScatter(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                         void* stream);
ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, void* stream);
ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, void* stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
}

namespace nccl_test {

/// A failed check inside a rank: says where and what, and ends the rank with status 1.
#define RANK_CHECK(condition, ...)                                                              \
  do {                                                                                          \
    if (!(condition)) {                                                                         \
      std::fprintf(stderr, "rank check failed at %s:%d: %s: ", __FILE__, __LINE__, #condition); \
      std::fprintf(stderr, __VA_ARGS__);                                                        \
      std::fprintf(stderr, "\n");                                                               \
      std::_Exit(1);                                                                            \
    }                                                                                           \
  } while (0)

/// Forks `nranks` processes; each runs body(rank, id) (which returns its exit status) under a
/// 120 s alarm. Returns the ranks' wait statuses. The parent touches no CUDA: every rank starts its
/// own simulated GPUs (SIMCUDA_GPU is read in the child).
inline std::vector<int> run_ranks(int nranks, const std::function<int(int, const ncclUniqueId&)>& body) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return {};
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nranks; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(120);
      std::_Exit(body(rank, id));
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    statuses.push_back(status);
  }
  return statuses;
}

/// Rank `rank` of `nranks` on GPU `rank`: the communicator, or the rank ends with the reason.
inline ncclComm_t join(int rank, int nranks, const ncclUniqueId& id) {
  RANK_CHECK(cudaSetDevice(rank) == cudaSuccess, "cudaSetDevice(%d)", rank);
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  RANK_CHECK(r == ncclSuccess, "ncclCommInitRank: %s", ncclGetErrorString(r));
  return comm;
}

/// True when every rank exited with status 0.
inline bool all_succeeded(const std::vector<int>& statuses) {
  if (statuses.empty()) return false;
  for (int s : statuses)
    if (!WIFEXITED(s) || WEXITSTATUS(s) != 0) return false;
  return true;
}

}  // namespace nccl_test
