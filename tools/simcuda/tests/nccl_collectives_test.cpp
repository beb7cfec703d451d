// The simulated NCCL moves and reduces real bytes between the processes of a job: every
// collective, for every data type and operator, gives the exact result on every rank; sends and
// receives of one group never deadlock on their order; split communicators reduce over their
// members only. Ranks are forked processes on simulated GPUs, as torchrun starts them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nccl_buffers.hpp"

namespace {

using nccl_test::all_succeeded;
using nccl_test::device_buffer;
using nccl_test::get;
using nccl_test::host_copy;
using nccl_test::put;
using nccl_test::size_of;
using nccl_test::join;
using nccl_test::run_ranks;

constexpr ncclDataType_t all_types[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                        ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                        ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

class NcclCollectivesTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("SIMCUDA_GPU", "count:4,memory:4GiB,quiet:1", 1); }
};

// Inputs whose results are exact in every type, fp8 included: small integers and halves.
double sum_input(int rank, std::size_t i) { return static_cast<double>((i + static_cast<std::size_t>(rank)) % 2); }
double prod_input(int rank, std::size_t i) {
  return 1.0 + static_cast<double>((i + static_cast<std::size_t>(rank)) % 2);
}
double minmax_input(int rank, std::size_t i) {
  return static_cast<double>((i * 7 + static_cast<std::size_t>(rank) * 3) % 5);
}

TEST_F(NcclCollectivesTest, AllReduceIsExactForEveryTypeAndOperatorOnEveryRank) {
  constexpr int n = 4;
  constexpr std::size_t count = 1000;
  auto statuses = run_ranks(n, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, n, id);
    for (ncclDataType_t t : all_types) {
      for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
        auto input = [&](int r, std::size_t i) {
          switch (op) {
            case ncclSum:
              return sum_input(r, i);
            case ncclProd:
              return prod_input(r, i);
            case ncclAvg:
              return 2.0 * r;  // sum 12, average 3 in every type
            default:
              return minmax_input(r, i);
          }
        };
        void* buffer = device_buffer(t, count, [&](std::size_t i) { return input(rank, i); });
        ncclResult_t result = ncclAllReduce(buffer, buffer, count, t, op, comm, nullptr);  // in place
        RANK_CHECK(result == ncclSuccess, "type %d op %d: %s", t, op, ncclGetErrorString(result));
        std::vector<char> got = host_copy(buffer, t, count);
        for (std::size_t i = 0; i < count; ++i) {
          double want = op == ncclProd ? 1.0 : 0.0;
          if (op == ncclMax) want = -1;
          if (op == ncclMin) want = 99;
          for (int r = 0; r < n; ++r) {
            double v = input(r, i);
            if (op == ncclSum || op == ncclAvg) want += v;
            if (op == ncclProd) want *= v;
            if (op == ncclMax) want = std::max(want, v);
            if (op == ncclMin) want = std::min(want, v);
          }
          if (op == ncclAvg) want /= n;
          RANK_CHECK(get(got.data(), i, t) == want, "type %d op %d element %zu: %g, want %g", t, op, i,
                     get(got.data(), i, t), want);
        }
        cudaFree(buffer);
      }
    }
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclCollectivesTest, LowPrecisionSumsRoundAsCudasOwnConversionsDo) {
  // Two ranks' values of every bit pattern-ish range: the float sum of two is exact, so the result
  // is one rounding of it, which CUDA's host conversions (round to nearest even; fp8 saturating to
  // the largest finite value, as NCCL converts) compute independently.
  constexpr int n = 2;
  constexpr std::size_t count = 8192;
  auto value = [](int rank, std::size_t i, ncclDataType_t t) {
    // Magnitudes from below the smallest subnormal to past the largest finite value, both signs.
    const std::size_t r = static_cast<std::size_t>(rank);
    const bool e5m2 = t == ncclFloat8e5m2;
    const int span = e5m2 ? 46 : 36, low = e5m2 ? 29 : 20;
    const double scale = t == ncclFloat8e4m3 ? 1.0 : e5m2 ? 2.0 : 8.0;
    double mantissa = 1.0 + static_cast<double>((i * 2654435761u + r * 40503u) % 1000) / 1000.0;
    double x = std::ldexp(mantissa, static_cast<int>((i * 7 + r * 3) % static_cast<std::size_t>(span)) - low) * scale;
    return (i + r) % 3 == 0 ? -x : x;
  };
  auto statuses = run_ranks(n, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, n, id);
    for (ncclDataType_t t : {ncclFloat16, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2}) {
      void* buffer = device_buffer(t, count, [&](std::size_t i) { return value(rank, i, t); });
      RANK_CHECK(ncclAllReduce(buffer, buffer, count, t, ncclSum, comm, nullptr) == ncclSuccess, "all-reduce");
      auto got = host_copy(buffer, t, count);
      std::vector<char> a(count * size_of(t)), b(count * size_of(t)), want(count * size_of(t));
      for (std::size_t i = 0; i < count; ++i) {
        put(a.data(), i, t, value(0, i, t));
        put(b.data(), i, t, value(1, i, t));
        put(want.data(), i, t, static_cast<float>(get(a.data(), i, t)) + static_cast<float>(get(b.data(), i, t)));
      }
      for (std::size_t i = 0; i < count; ++i)
        RANK_CHECK(std::memcmp(got.data() + i * size_of(t), want.data() + i * size_of(t), size_of(t)) == 0,
                   "type %d element %zu: %g + %g gave %g, CUDA rounds to %g", t, i, get(a.data(), i, t),
                   get(b.data(), i, t), get(got.data(), i, t), get(want.data(), i, t));
      cudaFree(buffer);
    }
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclCollectivesTest, EveryCollectiveMovesTheRightBytesAcrossManyStagingSteps) {
  constexpr int n = 4;
  // 600000 floats: 2.4 MB per rank, more than the 1 MiB staging slot, with a partial last step.
  constexpr std::size_t count = 600000;
  constexpr ncclDataType_t t = ncclFloat32;
  auto value = [](int r, std::size_t i) { return static_cast<double>((i % 1000) * 10 + static_cast<std::size_t>(r)); };
  auto statuses = run_ranks(n, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, n, id);
    const std::size_t nn = n;
    void* mine = device_buffer(t, count * nn, [&](std::size_t i) { return value(rank, i); });
    void* out = device_buffer(t, count * nn, [](std::size_t) { return -1.0; });

    // all-gather: block r is rank r's first `count` values.
    RANK_CHECK(ncclAllGather(mine, out, count, t, comm, nullptr) == ncclSuccess, "all-gather");
    auto got = host_copy(out, t, count * nn);
    for (std::size_t i = 0; i < count * nn; i += 997)
      RANK_CHECK(get(got.data(), i, t) == value(static_cast<int>(i / count), i % count), "all-gather element %zu", i);

    // reduce-scatter (sum): rank r gets the sum of every rank's block r.
    RANK_CHECK(ncclReduceScatter(mine, out, count, t, ncclSum, comm, nullptr) == ncclSuccess, "reduce-scatter");
    got = host_copy(out, t, count);
    for (std::size_t i = 0; i < count; i += 991) {
      double want = 0;
      for (int r = 0; r < n; ++r) want += value(r, static_cast<std::size_t>(rank) * count + i);
      RANK_CHECK(get(got.data(), i, t) == want, "reduce-scatter element %zu: %g want %g", i, get(got.data(), i, t),
                 want);
    }

    // broadcast from rank 2 into a separate buffer.
    RANK_CHECK(ncclBroadcast(mine, out, count, t, 2, comm, nullptr) == ncclSuccess, "broadcast");
    got = host_copy(out, t, count);
    for (std::size_t i = 0; i < count; i += 983) RANK_CHECK(get(got.data(), i, t) == value(2, i), "broadcast %zu", i);

    // reduce (max) to rank 1: only the root's output changes.
    void* fresh = device_buffer(t, count, [](std::size_t) { return -7.0; });
    RANK_CHECK(ncclReduce(mine, fresh, count, t, ncclMax, 1, comm, nullptr) == ncclSuccess, "reduce");
    got = host_copy(fresh, t, count);
    for (std::size_t i = 0; i < count; i += 977)
      RANK_CHECK(get(got.data(), i, t) == (rank == 1 ? value(n - 1, i) : -7.0), "reduce element %zu", i);

    // all-to-all: rank r's block d goes to rank d's block r.
    RANK_CHECK(ncclAlltoAll(mine, out, count, t, comm, nullptr) == ncclSuccess, "all-to-all");
    got = host_copy(out, t, count * nn);
    for (std::size_t i = 0; i < count * nn; i += 971) {
      std::size_t from = i / count;
      RANK_CHECK(
          get(got.data(), i, t) == value(static_cast<int>(from), static_cast<std::size_t>(rank) * count + i % count),
          "all-to-all element %zu", i);
    }

    // gather to rank 3, scatter from rank 0.
    RANK_CHECK(ncclGather(mine, out, count, t, 3, comm, nullptr) == ncclSuccess, "gather");
    if (rank == 3) {
      got = host_copy(out, t, count * nn);
      for (std::size_t i = 0; i < count * nn; i += 967)
        RANK_CHECK(get(got.data(), i, t) == value(static_cast<int>(i / count), i % count), "gather element %zu", i);
    }
    RANK_CHECK(ncclScatter(mine, out, count, t, 0, comm, nullptr) == ncclSuccess, "scatter");
    got = host_copy(out, t, count);
    for (std::size_t i = 0; i < count; i += 953)
      RANK_CHECK(get(got.data(), i, t) == value(0, static_cast<std::size_t>(rank) * count + i), "scatter element %zu",
                 i);
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

// values:off, the level of dry runs larger than the machine: no kernel computes, and no collective
// moves a byte (what it would move is garbage there, and copying it would commit host memory for
// every rank's buffers). The ranks still meet: every operation completes, in order, on every rank.
TEST_F(NcclCollectivesTest, AtValuesOffOperationsCompleteAndMoveNoBytes) {
  setenv("SIMCUDA_GPU", "count:4,memory:4GiB,quiet:1,values:off", 1);
  constexpr int n = 4;
  constexpr std::size_t count = 600000;  // several staging steps and mailbox turns, were bytes moved
  constexpr ncclDataType_t t = ncclFloat32;
  auto statuses = run_ranks(n, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, n, id);
    const std::size_t nn = n;
    void* mine = device_buffer(t, count * nn, [&](std::size_t) { return rank + 1.0; });
    void* out = device_buffer(t, count * nn, [](std::size_t) { return -1.0; });
    auto untouched = [&](const char* what) {
      auto got = host_copy(out, t, count * nn);
      for (std::size_t i = 0; i < count * nn; i += 4999) RANK_CHECK(get(got.data(), i, t) == -1.0, "%s wrote %zu", what, i);
    };
    RANK_CHECK(ncclAllReduce(mine, out, count, t, ncclSum, comm, nullptr) == ncclSuccess, "all-reduce");
    untouched("all-reduce");
    RANK_CHECK(ncclAllGather(mine, out, count, t, comm, nullptr) == ncclSuccess, "all-gather");
    untouched("all-gather");
    RANK_CHECK(ncclReduceScatter(mine, out, count, t, ncclSum, comm, nullptr) == ncclSuccess, "reduce-scatter");
    untouched("reduce-scatter");
    RANK_CHECK(ncclBroadcast(mine, out, count, t, 2, comm, nullptr) == ncclSuccess, "broadcast");
    untouched("broadcast");
    RANK_CHECK(ncclAlltoAll(mine, out, count, t, comm, nullptr) == ncclSuccess, "all-to-all");
    untouched("all-to-all");
    const int peer = rank ^ 1;
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    RANK_CHECK(ncclRecv(out, count * nn, t, peer, comm, nullptr) == ncclSuccess, "recv");
    RANK_CHECK(ncclSend(mine, count * nn, t, peer, comm, nullptr) == ncclSuccess, "send");
    ncclResult_t r = ncclGroupEnd();
    RANK_CHECK(r == ncclSuccess, "group end: %s", ncclGetErrorString(r));
    untouched("send/recv");
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclCollectivesTest, GroupedSendsAndReceivesExchangeInAnyOrderIncludingWithItself) {
  constexpr int n = 3;
  // 3 MB per message: several times a mailbox, so sender and receiver must take turns.
  constexpr std::size_t count = 750000;
  auto statuses = run_ranks(n, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, n, id);
    std::vector<void*> to(n), from(n);
    for (int peer = 0; peer < n; ++peer) {
      to[peer] = device_buffer(ncclInt32, count, [&](std::size_t i) {
        return static_cast<double>(rank * 1000000 + peer * 10000 + static_cast<int>(i % 9999));
      });
      from[peer] = device_buffer(ncclInt32, count, [](std::size_t) { return 0.0; });
    }
    // Every rank posts its receives first: without a group this order would deadlock.
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    for (int peer = 0; peer < n; ++peer)
      RANK_CHECK(ncclRecv(from[peer], count, ncclInt32, peer, comm, nullptr) == ncclSuccess, "recv");
    for (int peer = 0; peer < n; ++peer)
      RANK_CHECK(ncclSend(to[peer], count, ncclInt32, peer, comm, nullptr) == ncclSuccess, "send");
    ncclResult_t r = ncclGroupEnd();
    RANK_CHECK(r == ncclSuccess, "group end: %s", ncclGetErrorString(r));
    for (int peer = 0; peer < n; ++peer) {
      auto got = host_copy(from[peer], ncclInt32, count);
      for (std::size_t i = 0; i < count; i += 4999)
        RANK_CHECK(get(got.data(), i, ncclInt32) == peer * 1000000 + rank * 10000 + static_cast<int>(i % 9999),
                   "from %d element %zu", peer, i);
    }
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclCollectivesTest, SplitCommunicatorsReduceOverTheirMembersInKeyOrder) {
  constexpr int n = 4;
  auto statuses = run_ranks(n, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t world = join(rank, n, id);
    ncclComm_t half = nullptr;
    // Even and odd ranks; keys reverse the order inside each.
    RANK_CHECK(ncclCommSplit(world, rank % 2, -rank, &half, nullptr) == ncclSuccess, "split");
    int half_rank = -1, half_count = -1;
    ncclCommUserRank(half, &half_rank);
    ncclCommCount(half, &half_count);
    RANK_CHECK(half_count == 2, "count %d", half_count);
    RANK_CHECK(half_rank == (rank < 2 ? 1 : 0), "rank %d in the split of %d", half_rank, rank);
    void* buffer = device_buffer(ncclInt64, 8, [&](std::size_t) { return static_cast<double>(1 << rank); });
    RANK_CHECK(ncclAllReduce(buffer, buffer, 8, ncclInt64, ncclSum, half, nullptr) == ncclSuccess, "all-reduce");
    auto got = host_copy(buffer, ncclInt64, 8);
    double want = rank % 2 == 0 ? (1 + 4) : (2 + 8);
    RANK_CHECK(get(got.data(), 0, ncclInt64) == want, "split sum %g, want %g", get(got.data(), 0, ncclInt64), want);
    // NCCL_SPLIT_NOCOLOR: no communicator for that rank.
    ncclComm_t none = reinterpret_cast<ncclComm_t>(0x1);
    RANK_CHECK(ncclCommSplit(world, rank == 0 ? SIMCUDA_NCCL_SPLIT_NOCOLOR : 7, 0, &none, nullptr) == ncclSuccess,
               "split 2");
    RANK_CHECK((rank == 0) == (none == nullptr), "NOCOLOR gives NULL");
    if (none != nullptr) ncclCommDestroy(none);
    ncclCommDestroy(half);
    return ncclCommDestroy(world) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclCollectivesTest, PreMulSumScalesEveryInputBeforeSumming) {
  constexpr int n = 2;
  auto statuses = run_ranks(n, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, n, id);
    float host_scalar = 0.5f;
    ncclRedOp_t op;
    RANK_CHECK(ncclRedOpCreatePreMulSum(&op, &host_scalar, ncclFloat32, ncclScalarHostImmediate, comm) == ncclSuccess,
               "create");
    void* buffer =
        device_buffer(ncclFloat32, 16, [&](std::size_t i) { return 4.0 * (rank + 1) + static_cast<double>(i); });
    RANK_CHECK(ncclAllReduce(buffer, buffer, 16, ncclFloat32, op, comm, nullptr) == ncclSuccess, "all-reduce");
    auto got = host_copy(buffer, ncclFloat32, 16);
    for (std::size_t i = 0; i < 16; ++i)
      RANK_CHECK(get(got.data(), i, ncclFloat32) == 0.5 * (4 + 8 + 2.0 * static_cast<double>(i)), "element %zu", i);
    RANK_CHECK(ncclRedOpDestroy(op, comm) == ncclSuccess, "destroy");
    RANK_CHECK(ncclAllReduce(buffer, buffer, 16, ncclFloat32, op, comm, nullptr) == ncclInvalidArgument,
               "destroyed op");
    // A scalar in device memory is read when the collective runs, not when the operator is made.
    void* scalar = device_buffer(ncclFloat64, 1, [](std::size_t) { return 3.0; });
    RANK_CHECK(ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat64, ncclScalarDevice, comm) == ncclSuccess, "create");
    double ten = 10.0;
    cudaMemcpy(scalar, &ten, sizeof ten, cudaMemcpyHostToDevice);
    void* doubles = device_buffer(ncclFloat64, 4, [&](std::size_t) { return rank + 1.0; });
    RANK_CHECK(ncclReduceScatter(doubles, doubles, 2, ncclFloat64, op, comm, nullptr) == ncclSuccess, "reduce-scatter");
    got = host_copy(doubles, ncclFloat64, 2);
    RANK_CHECK(get(got.data(), 0, ncclFloat64) == 30.0 && get(got.data(), 1, ncclFloat64) == 30.0, "device scalar: %g",
               get(got.data(), 0, ncclFloat64));
    RANK_CHECK(ncclAllReduce(doubles, doubles, 2, ncclFloat32, op, comm, nullptr) == ncclInvalidArgument,
               "an operator made for double used on float");
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclCollectivesTest, NonblockingConfigInPlaceBroadcastAndVersion) {
  constexpr int n = 2;
  auto statuses = run_ranks(n, [&](int rank, const ncclUniqueId& id) {
    int version = 0;
    RANK_CHECK(ncclGetVersion(&version) == ncclSuccess && version >= 22907, "version %d", version);
    cudaSetDevice(rank);
    // NCCL_CONFIG_INITIALIZER's leading fields, with blocking = 0.
    simcuda_nccl_config_head config{sizeof(simcuda_nccl_config_head), SIMCUDA_NCCL_CONFIG_MAGIC, 22907u, 0};
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
    RANK_CHECK(r == ncclSuccess || r == ncclInProgress, "init %d", r);
    ncclResult_t state = ncclInProgress;
    RANK_CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclSuccess, "ready");
    int device = -1;
    RANK_CHECK(ncclCommCuDevice(comm, &device) == ncclSuccess && device == rank, "device %d", device);
    void* buffer = device_buffer(ncclInt32, 5, [&](std::size_t i) { return rank == 1 ? 7.0 * i : -1.0; });
    RANK_CHECK(ncclBcast(buffer, 5, ncclInt32, 1, comm, nullptr) == ncclSuccess, "bcast");
    auto got = host_copy(buffer, ncclInt32, 5);
    for (std::size_t i = 0; i < 5; ++i) RANK_CHECK(get(got.data(), i, ncclInt32) == 7.0 * i, "element %zu", i);
    simcuda_nccl_config_head garbage{sizeof(simcuda_nccl_config_head), 0, 0, 0};
    ncclComm_t other = nullptr;
    RANK_CHECK(ncclCommInitRankConfig(&other, n, id, rank, &garbage) == ncclInvalidArgument, "uninitialised config");
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

}  // namespace
