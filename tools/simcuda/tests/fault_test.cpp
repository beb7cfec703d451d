// simcuda's device memory through the public CUDA API (runtime and driver stand-ins linked
// directly): freed and unmapped device memory faults like an illegal address on a GPU, mapped
// memory is real and shared by every mapping of a handle, capacity is enforced and reported.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "simcuda/introspect.h"

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

class simcuda_memory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("SIMCUDA_GPU", "quiet:1,memory:1GiB", 1); }
};

CUmemAllocationProp device_prop() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  return prop;
}

CUmemAccessDesc read_write() {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

volatile unsigned char g_sink;

TEST_F(simcuda_memory, CudaMallocMemoryIsRealAndCountsAgainstTheCapacity) {
  std::size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  EXPECT_EQ(total, std::size_t{1} << 30);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 3 * mib + 1), cudaSuccess);
  std::size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, 4 * mib);  // whole 2 MiB pages
  const char text[] = "device bytes";
  ASSERT_EQ(cudaMemcpy(static_cast<char*>(p) + 3 * mib, text, sizeof text, cudaMemcpyHostToDevice), cudaSuccess);
  char back[sizeof text] = {};
  ASSERT_EQ(cudaMemcpy(back, static_cast<char*>(p) + 3 * mib, sizeof text, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_STREQ(back, text);
  // A copy past the allocation is an error value, not a fault.
  EXPECT_EQ(cudaMemcpy(back, static_cast<char*>(p) + 4 * mib - 4, sizeof text, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // double free
  void* too_big = nullptr;
  EXPECT_EQ(cudaMalloc(&too_big, std::size_t{2} << 30), cudaErrorMemoryAllocation);
}

TEST_F(simcuda_memory, UseAfterCudaFreeFaultsWithAnIllegalAddress) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 2 * mib), cudaSuccess);
  static_cast<unsigned char*>(p)[100] = 7;
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EXIT(g_sink = static_cast<unsigned char*>(p)[100], ::testing::KilledBySignal(SIGSEGV),
              "simcuda: illegal address 0x[0-9a-f]+ on simulated GPU 0");
}

TEST_F(simcuda_memory, UseAfterUnmapFaultsAndAHandleKeepsItsBytesAcrossMappings) {
  CUmemAllocationProp prop = device_prop();
  std::size_t granularity = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  ASSERT_EQ(granularity, 2 * mib);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 4 * mib, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAddressReserve(&a, 16 * mib, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&b, 16 * mib, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(a, 4 * mib, 0, handle, 0), CUDA_SUCCESS);
  CUmemAccessDesc access = read_write();
  ASSERT_EQ(cuMemSetAccess(a, 4 * mib, &access, 1), CUDA_SUCCESS);
  auto* pa = reinterpret_cast<unsigned char*>(a);
  pa[3 * mib] = 42;
  ASSERT_EQ(cuMemMap(b, 4 * mib, 0, handle, 0), CUDA_SUCCESS);  // a second mapping of the same memory
  ASSERT_EQ(cuMemSetAccess(b, 4 * mib, &access, 1), CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(b)[3 * mib], 42);
  EXPECT_EQ(simcuda_mapped_bytes(0), 4 * mib);  // a handle counts once, however often it is mapped
  ASSERT_EQ(cuMemUnmap(a, 4 * mib), CUDA_SUCCESS);
  EXPECT_EXIT(g_sink = pa[3 * mib], ::testing::KilledBySignal(SIGSEGV), "simcuda: illegal address");
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);  // still mapped at b: freed at its unmap
  EXPECT_EQ(reinterpret_cast<unsigned char*>(b)[3 * mib], 42);
  ASSERT_EQ(cuMemUnmap(b, 4 * mib), CUDA_SUCCESS);
  EXPECT_EQ(simcuda_mapped_bytes(0), 0u);
  EXPECT_EQ(cuMemAddressFree(a, 16 * mib), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(b, 16 * mib), CUDA_SUCCESS);
}

TEST_F(simcuda_memory, AHostLocatedHandleMapsAtDeviceAddressesOutsideTheCapacity) {
  int supported = 0;
  ASSERT_EQ(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
            CUDA_SUCCESS);
  EXPECT_EQ(supported, 1);
  CUmemAllocationProp prop = device_prop();
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  CUmemGenericAllocationHandle host = 0;
  ASSERT_EQ(cuMemCreate(&host, 4 * mib, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(simcuda_mapped_bytes(0), 0u);  // not the device's memory
  EXPECT_EQ(simcuda_host_located_bytes(), 4 * mib);
  CUmemAllocationProp asked{};
  ASSERT_EQ(cuMemGetAllocationPropertiesFromHandle(&asked, host), CUDA_SUCCESS);
  EXPECT_EQ(asked.location.type, CU_MEM_LOCATION_TYPE_HOST);
  // Device memory and the host handle side by side; cuMemcpyAsync moves bytes between them.
  CUmemGenericAllocationHandle dev = 0;
  CUmemAllocationProp on_device = device_prop();
  ASSERT_EQ(cuMemCreate(&dev, 4 * mib, &on_device, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAddressReserve(&a, 4 * mib, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&b, 4 * mib, 0, 0, 0), CUDA_SUCCESS);
  CUmemAccessDesc access = read_write();
  ASSERT_EQ(cuMemMap(a, 4 * mib, 0, dev, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(a, 4 * mib, &access, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(b, 4 * mib, 0, host, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(b, 4 * mib, &access, 1), CUDA_SUCCESS);
  std::memset(reinterpret_cast<void*>(a), 0x5a, 4 * mib);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyAsync(b + 100, a + 100, 3 * mib, stream), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(b)[100], 0x5a);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(b)[100 + 3 * mib - 1], 0x5a);
  EXPECT_EQ(reinterpret_cast<unsigned char*>(b)[99], 0);  // only the bytes asked for
  EXPECT_EQ(cuMemcpyAsync(b, a, 8 * mib, stream), CUDA_ERROR_INVALID_VALUE);  // past the mappings
  EXPECT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(b, 4 * mib), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(host), CUDA_SUCCESS);
  EXPECT_EQ(simcuda_host_located_bytes(), 0u);
  EXPECT_EQ(simcuda_peak_host_located_bytes(), 4 * mib);
  ASSERT_EQ(cuMemUnmap(a, 4 * mib), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(dev), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(a, 4 * mib), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(b, 4 * mib), CUDA_SUCCESS);
}

TEST_F(simcuda_memory, TheDriversPageLockedMemoryIsTheRuntimesToo) {
  const std::size_t before = simcuda_pinned_host_bytes();
  void* p = nullptr;
  ASSERT_EQ(cuMemHostAlloc(&p, 1 * mib + 1, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
  EXPECT_EQ(simcuda_pinned_host_bytes() - before, 1 * mib + 4096);  // whole 4 KiB pages
  void* base = nullptr;
  std::size_t bytes = 0;
  int device = -1;
  EXPECT_EQ(simcuda_pointer_range(p, &base, &bytes, &device), 2);  // pinned host memory
  std::memset(p, 0x7e, 1 * mib + 1);
  EXPECT_EQ(cudaFreeHost(p), cudaSuccess);  // one set of books: the runtime frees what the driver made
  EXPECT_EQ(simcuda_pinned_host_bytes(), before);
  EXPECT_EQ(cuMemAllocHost(&p, 4096), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(p), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeHost(p), CUDA_ERROR_INVALID_VALUE);  // freed already
  EXPECT_EQ(cuMemHostAlloc(&p, 4096, 0x80), CUDA_ERROR_INVALID_VALUE);  // a flag the driver does not have
  EXPECT_EQ(simcuda_pinned_host_bytes(), before);
}

/// In a process of its own (SIMCUDA_GPU is read once): a driver before CUDA 12.2 has no
/// host-located cuMemCreate. Exits 0 when the attributes say so and a host location is refused.
[[noreturn]] void without_host_vmm() {
  setenv("SIMCUDA_GPU", "quiet:1,memory:1GiB,host_vmm:0", 1);
  int host = 1, numa = 1;
  if (cuDeviceGetAttribute(&host, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) != CUDA_SUCCESS ||
      cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0) != CUDA_SUCCESS) {
    std::_Exit(10);
  }
  if (host != 0 || numa != 0) std::_Exit(11);
  CUmemAllocationProp prop = device_prop();
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  CUmemGenericAllocationHandle handle = 0;
  if (cuMemCreate(&handle, 4 * mib, &prop, 0) == CUDA_SUCCESS) std::_Exit(12);
  std::size_t granularity = 0;
  if (cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS) {
    std::_Exit(13);
  }
  CUmemAllocationProp on_device = device_prop();  // device memory as ever
  if (cuMemCreate(&handle, 4 * mib, &on_device, 0) != CUDA_SUCCESS || cuMemRelease(handle) != CUDA_SUCCESS) {
    std::_Exit(14);
  }
  std::_Exit(0);
}

TEST(simcuda_host_vmm, HostVmmOffPlaysADriverWithoutHostLocatedHandles) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(without_host_vmm(), ::testing::ExitedWithCode(0), "");
}

TEST_F(simcuda_memory, AddressSpaceIsFarLargerThanTheCapacity) {
  // Allocators reserve ~1.1x the capacity per pool and stream (expandable segments, cuda_vmm).
  std::vector<CUdeviceptr> reserved;
  for (int i = 0; i < 64; ++i) {
    CUdeviceptr p = 0;
    ASSERT_EQ(cuMemAddressReserve(&p, std::size_t{16} << 30, 0, 0, 0), CUDA_SUCCESS) << i;  // 1 TiB in all
    reserved.push_back(p);
  }
  for (CUdeviceptr p : reserved) EXPECT_EQ(cuMemAddressFree(p, std::size_t{16} << 30), CUDA_SUCCESS);
  EXPECT_EQ(simcuda_mapped_bytes(0), 0u);
}

TEST_F(simcuda_memory, MappedPagesWithoutAccessFault) {
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 2 * mib, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAddressReserve(&a, 2 * mib, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(a, 2 * mib, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_EXIT(g_sink = *reinterpret_cast<unsigned char*>(a), ::testing::KilledBySignal(SIGSEGV),
              "simcuda: illegal address");
  EXPECT_EQ(cuMemUnmap(a, 2 * mib), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(a, 2 * mib), CUDA_SUCCESS);
}

TEST_F(simcuda_memory, VmmMisuseIsAnErrorValue) {
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(cuMemCreate(&handle, 3 * mib, &prop, 0), CUDA_ERROR_INVALID_VALUE);  // not a granule multiple
  EXPECT_EQ(cuMemCreate(&handle, std::size_t{2} << 30, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemCreate(&handle, 2 * mib, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAddressReserve(&a, 4 * mib, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(a, 4 * mib, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // larger than the handle
  ASSERT_EQ(cuMemMap(a, 2 * mib, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_NE(cuMemMap(a, 2 * mib, 0, handle, 0), CUDA_SUCCESS);  // already mapped there
  EXPECT_NE(cuMemAddressFree(a, 4 * mib), CUDA_SUCCESS);        // still has a mapping
  EXPECT_NE(cuMemUnmap(a, 4 * mib), CUDA_SUCCESS);              // the range is not all mapped
  EXPECT_EQ(cuMemUnmap(a, 2 * mib), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_NE(cuMemRelease(handle), CUDA_SUCCESS);  // double release
  EXPECT_EQ(cuMemAddressFree(a, 4 * mib), CUDA_SUCCESS);
}

TEST_F(simcuda_memory, AZeroMemsetClearsExactlyItsRangeInAllocationsAndMappings) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 4 * mib), cudaSuccess);
  auto* bytes = static_cast<unsigned char*>(p);
  ASSERT_EQ(cudaMemset(p, 0xab, 4 * mib), cudaSuccess);
  const std::size_t start = 100, length = 3 * mib + 5;  // partial pages at both ends
  ASSERT_EQ(cudaMemset(bytes + start, 0, length), cudaSuccess);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < 4 * mib; ++i) {
    const unsigned char expected = i >= start && i < start + length ? 0 : 0xab;
    wrong += bytes[i] != expected;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(cudaFree(p), cudaSuccess);

  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 4 * mib, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAddressReserve(&a, 8 * mib, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(a + 2 * mib, 2 * mib, 2 * mib, handle, 0), CUDA_SUCCESS);  // the handle's second half
  CUmemAccessDesc access = read_write();
  ASSERT_EQ(cuMemSetAccess(a + 2 * mib, 2 * mib, &access, 1), CUDA_SUCCESS);
  auto* mapped = reinterpret_cast<unsigned char*>(a + 2 * mib);
  std::memset(mapped, 0xcd, 2 * mib);
  ASSERT_EQ(cuMemsetD8Async(a + 2 * mib + 4096, 0, mib, nullptr), CUDA_SUCCESS);
  wrong = 0;
  for (std::size_t i = 0; i < 2 * mib; ++i) wrong += mapped[i] != (i >= 4096 && i < 4096 + mib ? 0 : 0xcd);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(cuMemUnmap(a + 2 * mib, 2 * mib), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(a, 8 * mib), CUDA_SUCCESS);
}

TEST_F(simcuda_memory, AZeroMemsetAcrossAdjacentMappingsClearsExactlyItsRange) {
  // An expandable segment's pages: one handle per page, mapped side by side. A memset over several
  // of them must clear each page's memory, and only the range asked for.
  CUmemAllocationProp prop = device_prop();
  CUmemGenericAllocationHandle handles[3] = {};
  CUdeviceptr a = 0;
  ASSERT_EQ(cuMemAddressReserve(&a, 6 * mib, 0, 0, 0), CUDA_SUCCESS);
  CUmemAccessDesc access = read_write();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(cuMemCreate(&handles[i], 2 * mib, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemMap(a + i * 2 * mib, 2 * mib, 0, handles[i], 0), CUDA_SUCCESS);
  }
  ASSERT_EQ(cuMemSetAccess(a, 6 * mib, &access, 1), CUDA_SUCCESS);
  auto* bytes = reinterpret_cast<unsigned char*>(a);
  std::memset(bytes, 0xcd, 6 * mib);
  const std::size_t start = 4096 + 7, length = 5 * mib;  // partial pages at both ends, three mappings
  ASSERT_EQ(cuMemsetD8Async(a + start, 0, length, nullptr), CUDA_SUCCESS);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < 6 * mib; ++i) wrong += bytes[i] != (i >= start && i < start + length ? 0 : 0xcd);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(cuMemUnmap(a, 6 * mib), CUDA_SUCCESS);
  for (auto h : handles) EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAddressFree(a, 6 * mib), CUDA_SUCCESS);
}

TEST_F(simcuda_memory, PointerAttributesNameDeviceAndHostMemory) {
  void* d = nullptr;
  void* h = nullptr;
  ASSERT_EQ(cudaMalloc(&d, mib), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&h, mib, cudaHostAllocDefault), cudaSuccess);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, static_cast<char*>(d) + 10), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attr.device, 0);
  ASSERT_EQ(cudaPointerGetAttributes(&attr, h), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  int on_stack = 0;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, &on_stack), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(cudaFreeHost(h), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(simcuda_memory, EventsCompleteAtRecordByDefault) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorInvalidResourceHandle);  // destroyed: an error, not a crash
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
}

}  // namespace
