// CUDA_VISIBLE_DEVICES on the simulated machine: the runtime's and driver's ordinals index the
// visible list (read once, with the driver's rules), the machine GPU behind an ordinal keeps its
// identity (UUID, PCI bus id), NVML lists the whole machine, and NCCL ranks that each see one GPU
// as ordinal 0 (as Ray starts its actors) form a communicator. Each case runs in a forked process
// that sets the variable before its first CUDA call.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "nccl_ranks.hpp"

extern "C" {
int nvmlInit_v2();
int nvmlDeviceGetCount_v2(unsigned int* count);
}

namespace {

using nccl_test::all_succeeded;
using nccl_test::run_ranks;

/// The first UUID byte of the GPU behind an ordinal: 0x5a ^ its machine index (the simulator's UUIDs).
int machine_of(int ordinal) {
  cudaDeviceProp prop{};
  RANK_CHECK(cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess, "cudaGetDeviceProperties(%d)", ordinal);
  CUuuid uuid{};
  RANK_CHECK(cuDeviceGetUuid(&uuid, ordinal) == CUDA_SUCCESS, "cuDeviceGetUuid(%d)", ordinal);
  RANK_CHECK(std::memcmp(uuid.bytes, prop.uuid.bytes, 16) == 0, "runtime and driver UUIDs differ");
  char bus[32] = {};
  RANK_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess, "cudaDeviceGetPCIBusId");
  const int machine = static_cast<unsigned char>(prop.uuid.bytes[0]) ^ 0x5a;
  char expected[32];
  std::snprintf(expected, sizeof expected, "0000:%02x:00.0", 1 + machine);
  RANK_CHECK(std::strcmp(bus, expected) == 0, "PCI bus id %s, machine GPU %d", bus, machine);
  return machine;
}

/// Runs body in a forked process whose CUDA_VISIBLE_DEVICES is `visible` (nullptr: unset).
bool with_visible(const char* visible, const std::function<int()>& body) {
  return all_succeeded(run_ranks(1, [&](int, const ncclUniqueId&) {
    if (visible) setenv("CUDA_VISIBLE_DEVICES", visible, 1);
    else unsetenv("CUDA_VISIBLE_DEVICES");
    return body();
  }));
}

int count() {
  int n = -1;
  cudaError_t e = cudaGetDeviceCount(&n);
  RANK_CHECK(e == cudaSuccess || (e == cudaErrorNoDevice && n == 0), "cudaGetDeviceCount: %d", e);
  return n;
}

class VisibleDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("SIMCUDA_GPU", "count:4,memory:1GiB,quiet:1", 1); }
};

TEST_F(VisibleDevicesTest, OrdinalsIndexTheVisibleListAndKeepTheMachineGpusIdentity) {
  EXPECT_TRUE(with_visible(nullptr, [] {
    RANK_CHECK(count() == 4, "all four");
    for (int d = 0; d < 4; ++d) RANK_CHECK(machine_of(d) == d, "ordinal %d is machine GPU %d", d, d);
    return 0;
  }));
  EXPECT_TRUE(with_visible("2", [] {
    RANK_CHECK(count() == 1, "one GPU");
    RANK_CHECK(machine_of(0) == 2, "ordinal 0 is machine GPU 2");
    RANK_CHECK(cudaSetDevice(1) == cudaErrorInvalidDevice, "ordinal 1 does not exist");
    void* p = nullptr;
    RANK_CHECK(cudaSetDevice(0) == cudaSuccess && cudaMalloc(&p, 1 << 20) == cudaSuccess, "memory on it");
    return 0;
  }));
  EXPECT_TRUE(with_visible("3, 1", [] {
    RANK_CHECK(count() == 2 && machine_of(0) == 3 && machine_of(1) == 1, "in the list's order");
    return 0;
  }));
  // NVML lists the machine whatever the variable says.
  EXPECT_TRUE(with_visible("1", [] {
    unsigned n = 0;
    RANK_CHECK(nvmlInit_v2() == 0 && nvmlDeviceGetCount_v2(&n) == 0 && n == 4, "NVML sees %u", n);
    return 0;
  }));
}

TEST_F(VisibleDevicesTest, TheListEndsAtTheFirstEntryThatNamesNoGpuOrOneAlreadyNamed) {
  EXPECT_TRUE(with_visible("1,7,0", [] { return count() == 1 && machine_of(0) == 1 ? 0 : 1; }));
  EXPECT_TRUE(with_visible("0,2,0,3", [] { return count() == 2 && machine_of(1) == 2 ? 0 : 1; }));
  EXPECT_TRUE(with_visible("2,x,1", [] { return count() == 1 ? 0 : 1; }));
  EXPECT_TRUE(with_visible("", [] { return count() == 0 ? 0 : 1; }));
  EXPECT_TRUE(with_visible("-1", [] { return count() == 0 ? 0 : 1; }));
  // A UUID, or a prefix of exactly one: machine GPU 3's UUID begins 0x5a ^ 3 = 0x59.
  EXPECT_TRUE(with_visible("GPU-59", [] { return count() == 1 && machine_of(0) == 3 ? 0 : 1; }));
  EXPECT_TRUE(with_visible("GPU-5", [] { return count() == 0 ? 0 : 1; }));  // every UUID starts so
}

TEST_F(VisibleDevicesTest, RanksThatEachSeeOneGpuAsOrdinalZeroFormACommunicator) {
  auto statuses = run_ranks(2, [](int rank, const ncclUniqueId& id) {
    setenv("CUDA_VISIBLE_DEVICES", rank == 0 ? "1" : "0", 1);
    RANK_CHECK(cudaSetDevice(0) == cudaSuccess, "ordinal 0");
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
    RANK_CHECK(r == ncclSuccess, "two GPUs, not one: %s", ncclGetLastError(nullptr));
    int* data = nullptr;
    RANK_CHECK(cudaMalloc(reinterpret_cast<void**>(&data), 4 * sizeof(int)) == cudaSuccess, "cudaMalloc");
    int host[4] = {rank + 1, rank + 1, rank + 1, rank + 1};
    RANK_CHECK(cudaMemcpy(data, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess, "copy in");
    RANK_CHECK(ncclAllReduce(data, data, 4, ncclInt32, ncclSum, comm, nullptr) == ncclSuccess, "all-reduce");
    RANK_CHECK(cudaMemcpy(host, data, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess, "copy out");
    RANK_CHECK(host[0] == 3 && host[3] == 3, "sum %d", host[0]);
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    return 0;
  });
  EXPECT_TRUE(all_succeeded(statuses));
  // Two ranks whose lists name the same machine GPU are still one GPU.
  auto same = run_ranks(2, [](int rank, const ncclUniqueId& id) {
    setenv("CUDA_VISIBLE_DEVICES", rank == 0 ? "2" : "3,2", 1);
    RANK_CHECK(cudaSetDevice(rank == 0 ? 0 : 1) == cudaSuccess, "machine GPU 2 in both");
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
    RANK_CHECK(r == ncclInvalidUsage, "duplicate GPU gave %d", r);
    RANK_CHECK(std::string(ncclGetLastError(nullptr)).find("both use GPU 2") != std::string::npos, "%s",
               ncclGetLastError(nullptr));
    return 0;
  });
  EXPECT_TRUE(all_succeeded(same));
}

}  // namespace
