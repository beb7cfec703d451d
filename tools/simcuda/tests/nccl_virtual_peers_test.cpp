// The simulated NCCL with virtual peers (SIMCUDA_GPU nccl_peers:virtual): one process is one rank of
// a job whose other ranks do not run. Communicators of any size are complete at once, and every
// collective answers as if each absent rank held this rank's values (Note [virtual peers] in
// src/nccl/README.md); NCCL's own memory is what a real rank's would be. Each test is one forked
// process (SIMCUDA_GPU is read once per process).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "nccl_buffers.hpp"
#include "simcuda/introspect.h"

namespace {

using nccl_test::all_succeeded;
using nccl_test::device_buffer;
using nccl_test::get;
using nccl_test::host_copy;
using nccl_test::run_ranks;

/// Runs body() as rank `rank` of `nranks` (the others virtual) in a process of its own.
template <typename Body>
bool as_rank(int rank, int nranks, const char* conf, Body body) {
  return all_succeeded(run_ranks(1, [&](int, const ncclUniqueId&) {
    setenv("SIMCUDA_GPU", conf, 1);
    RANK_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
    ncclUniqueId nothing;  // what the dry run's store gives a rank whose communicator's rank 0 is absent
    std::memset(&nothing, 0, sizeof nothing);
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, nranks, nothing, rank);
    RANK_CHECK(r == ncclSuccess, "ncclCommInitRank(%d of %d): %s", rank, nranks, ncclGetErrorString(r));
    body(comm);
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  }));
}

constexpr const char* values_on = "quiet:1,memory:4GiB,values:exact,nccl_peers:virtual";

double value(std::size_t i) { return static_cast<double>(i % 13) - 6.0; }

TEST(NcclVirtualPeers, CollectivesAnswerAsIfEveryRankHeldThisRanksValues) {
  constexpr int n = 256;  // beyond the 64 ranks a real communicator of the simulator can hold
  constexpr int me = 3;
  constexpr std::size_t count = 3000;  // a reduce-scatter's 1/256 slot pieces take several steps
  EXPECT_TRUE(as_rank(me, n, values_on, [&](ncclComm_t comm) {
    int got_count = 0, got_rank = -1;
    RANK_CHECK(ncclCommCount(comm, &got_count) == ncclSuccess && got_count == n, "count %d", got_count);
    RANK_CHECK(ncclCommUserRank(comm, &got_rank) == ncclSuccess && got_rank == me, "rank %d", got_rank);
    const std::size_t nn = n;
    const ncclDataType_t t = ncclFloat32;
    void* mine = device_buffer(t, count * nn, [](std::size_t i) { return value(i); });
    void* out = device_buffer(t, count * nn, [](std::size_t) { return -1.0; });

    RANK_CHECK(ncclAllReduce(mine, out, count, t, ncclSum, comm, nullptr) == ncclSuccess, "all-reduce");
    auto got = host_copy(out, t, count);
    for (std::size_t i = 0; i < count; ++i) RANK_CHECK(get(got.data(), i, t) == n * value(i), "all-reduce %zu", i);
    RANK_CHECK(ncclAllReduce(mine, out, count, t, ncclAvg, comm, nullptr) == ncclSuccess, "all-reduce avg");
    got = host_copy(out, t, count);
    for (std::size_t i = 0; i < count; ++i) RANK_CHECK(get(got.data(), i, t) == value(i), "avg %zu", i);

    RANK_CHECK(ncclAllGather(mine, out, count, t, comm, nullptr) == ncclSuccess, "all-gather");
    got = host_copy(out, t, count * nn);
    for (std::size_t k = 0; k < nn; k += 17)
      for (std::size_t i = 0; i < count; i += 7)
        RANK_CHECK(get(got.data(), k * count + i, t) == value(i), "all-gather block %zu element %zu", k, i);

    // Rank r's result is the sum over ranks of block r: 256 times this rank's block `me`.
    RANK_CHECK(ncclReduceScatter(mine, out, count, t, ncclSum, comm, nullptr) == ncclSuccess, "reduce-scatter");
    got = host_copy(out, t, count);
    for (std::size_t i = 0; i < count; ++i)
      RANK_CHECK(get(got.data(), i, t) == n * value(me * count + i), "reduce-scatter %zu", i);

    RANK_CHECK(ncclAlltoAll(mine, out, count, t, comm, nullptr) == ncclSuccess, "all-to-all");
    got = host_copy(out, t, count * nn);
    for (std::size_t k = 0; k < nn; k += 17)
      for (std::size_t i = 0; i < count; i += 7)
        RANK_CHECK(get(got.data(), k * count + i, t) == value(me * count + i), "all-to-all block %zu", k);

    // An absent root's broadcast leaves the buffer as it is; this rank's own is copied.
    void* fresh = device_buffer(t, count, [](std::size_t) { return -7.0; });
    RANK_CHECK(ncclBroadcast(mine, fresh, count, t, 0, comm, nullptr) == ncclSuccess, "broadcast from 0");
    got = host_copy(fresh, t, count);
    for (std::size_t i = 0; i < count; ++i) RANK_CHECK(get(got.data(), i, t) == -7.0, "broadcast from 0 wrote %zu", i);
    RANK_CHECK(ncclBroadcast(mine, fresh, count, t, me, comm, nullptr) == ncclSuccess, "broadcast from me");
    got = host_copy(fresh, t, count);
    for (std::size_t i = 0; i < count; ++i) RANK_CHECK(get(got.data(), i, t) == value(i), "broadcast %zu", i);

    // Point-to-point: what this rank sends itself comes back; a receive from an absent peer leaves
    // its buffer as it is; a send to one is taken.
    void* from_self = device_buffer(t, count, [](std::size_t) { return 0.0; });
    void* from_peer = device_buffer(t, count, [](std::size_t) { return -3.0; });
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    RANK_CHECK(ncclRecv(from_self, count, t, me, comm, nullptr) == ncclSuccess, "recv from self");
    RANK_CHECK(ncclRecv(from_peer, count, t, 200, comm, nullptr) == ncclSuccess, "recv from 200");
    RANK_CHECK(ncclSend(mine, count, t, 200, comm, nullptr) == ncclSuccess, "send to 200");
    RANK_CHECK(ncclSend(mine, count, t, me, comm, nullptr) == ncclSuccess, "send to self");
    ncclResult_t r = ncclGroupEnd();
    RANK_CHECK(r == ncclSuccess, "group end: %s", ncclGetErrorString(r));
    got = host_copy(from_self, t, count);
    for (std::size_t i = 0; i < count; ++i) RANK_CHECK(get(got.data(), i, t) == value(i), "self recv %zu", i);
    got = host_copy(from_peer, t, count);
    for (std::size_t i = 0; i < count; ++i) RANK_CHECK(get(got.data(), i, t) == -3.0, "absent peer wrote %zu", i);
  }));
}

// NCCL's memory is a real rank's: the ring buffers at the first collective, a peer's receive
// buffers at the first receive from it (the model of memory_model.cpp, which these sizes follow
// with its defaults), counted on the device's books.
TEST(NcclVirtualPeers, NcclMemoryIsARealRanks) {
  EXPECT_TRUE(as_rank(0, 8, "quiet:1,memory:4GiB,values:off,nccl_peers:virtual", [](ncclComm_t comm) {
    RANK_CHECK(simcuda_nccl_bytes(0) == 0, "buffers before the first collective: %zu", simcuda_nccl_bytes(0));
    void* buffer = device_buffer(ncclFloat32, 1024, [](std::size_t) { return 1.0; });
    RANK_CHECK(ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "all-reduce");
    const std::size_t ring = 16 * (std::size_t{10} << 20);  // 16 channels of SIMPLE + LL + LL128, in 2 MiB pages
    RANK_CHECK(simcuda_nccl_bytes(0) == ring, "ring buffers %zu", simcuda_nccl_bytes(0));
    RANK_CHECK(ncclRecv(buffer, 1024, ncclFloat32, 5, comm, nullptr) == ncclSuccess, "recv");
    const std::size_t peer = 2 * 8 * (std::size_t{512} << 10);  // 2 channels x 8 steps x 512 KiB
    RANK_CHECK(simcuda_nccl_bytes(0) == ring + peer, "after a receive %zu", simcuda_nccl_bytes(0));
    auto got = host_copy(buffer, ncclFloat32, 1024);  // values:off: nothing was moved
    for (std::size_t i = 0; i < 1024; ++i) RANK_CHECK(get(got.data(), i, ncclFloat32) == 1.0, "moved %zu", i);
  }));
}

TEST(NcclVirtualPeers, ASplitIsRefusedWithTheReason) {
  EXPECT_TRUE(as_rank(1, 4, values_on, [](ncclComm_t comm) {
    ncclComm_t child = nullptr;
    RANK_CHECK(ncclCommSplit(comm, 0, 1, &child, nullptr) == ncclInvalidUsage, "split");
    const std::string said = ncclGetLastError(comm);
    RANK_CHECK(said.find("absent ranks' colors") != std::string::npos, "said: %s", said.c_str());
  }));
}

}  // namespace
