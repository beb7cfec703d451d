// cuda_vmm_device on a fake CUDA driver (fmt's posix-mock in spirit): its books, rollbacks and
// error texts, with no GPU and no libcuda. The fake keeps the driver's own books (reservations,
// handles, mappings, contexts, events) so a test can see exactly what the device left behind,
// and fails call N of any entry point with the CUresult a test asks for.
//
// It also runs the device conformance suite on the fake (FakeDriver/DeviceConformanceTest.*).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../conformance/device_conformance.hpp"
#include "cuda_driver_api.hpp"
#include "phasealloc/devices/cuda_vmm_device.hpp"

namespace phasealloc {
namespace {

// --- the fake driver ----------------------------------------------------------------------------

namespace fake {

const CUcontext primary_ctx = reinterpret_cast<CUcontext>(std::uintptr_t{0xc0});

struct handle_state {
  std::size_t size_bytes = 0;
  int mappings = 0;
  bool released = false;
};

struct mapping_state {
  std::size_t size_bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
};

/// A cuMemcpyAsync the device enqueued.
struct copy_call {
  CUdeviceptr dst = 0;
  CUdeviceptr src = 0;
  std::size_t bytes = 0;
  CUstream stream = nullptr;
};

struct driver_state {
  // Configuration.
  CUresult init_result = CUDA_SUCCESS;
  int device_count = 1;
  int vmm_supported = 1;
  std::size_t granularity_bytes = 2 * mib;
  std::size_t total_bytes = 64 * mib;
  CUresult event_query_result = CUDA_SUCCESS;
  int host_vmm = 1;  ///< CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED (table(true) only)
  std::map<std::string, std::pair<int, CUresult>> failures;  ///< entry -> (1-based call number, result)

  // Books.
  std::map<std::string, int> calls;
  CUdeviceptr next_va = 0x7000'0000'0000;
  std::map<CUdeviceptr, std::size_t> reservations;
  CUmemGenericAllocationHandle next_handle = 1;
  std::map<CUmemGenericAllocationHandle, handle_state> handles;  ///< live (memory not yet freed)
  std::map<CUdeviceptr, mapping_state> mappings;
  std::size_t used_bytes = 0;
  std::vector<std::pair<CUdeviceptr, std::size_t>> access_calls;
  std::vector<std::vector<int>> access_devices;  ///< The devices each cuMemSetAccess call named.
  int primary_retains = 0;
  std::vector<CUcontext> ctx_stack;
  std::uintptr_t next_event = 0x1000;
  std::set<CUevent> events;
  std::vector<CUstream> recorded_streams;
  std::set<CUmemGenericAllocationHandle> host_handles;  ///< host-located (not the device's memory)
  std::map<void*, std::size_t> pinned;                  ///< cuMemHostAlloc'd, not yet freed
  std::set<CUstream> streams;
  std::vector<copy_call> copies;
};

driver_state state;

/// Counts a call of `entry` and answers the failure a test planted for this call, if any.
CUresult hit(const char* entry) {
  const int n = ++state.calls[entry];
  const auto it = state.failures.find(entry);
  if (it != state.failures.end() && it->second.first == n) return it->second.second;
  return CUDA_SUCCESS;
}

void free_if_unused(CUmemGenericAllocationHandle h) {
  const auto it = state.handles.find(h);
  if (it->second.released && it->second.mappings == 0) {
    if (state.host_handles.erase(h) == 0) state.used_bytes -= it->second.size_bytes;
    state.handles.erase(it);
  }
}

CUresult init(unsigned int) {
  if (const CUresult r = hit("cuInit"); r != CUDA_SUCCESS) return r;
  return state.init_result;
}
CUresult get_error_name(CUresult r, const char** name) {
  switch (r) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult device_get(CUdevice* dev, int ordinal) {
  if (ordinal < 0 || ordinal >= state.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}
CUresult device_get_attribute(int* value, CUdevice_attribute attr, CUdevice) {
  *value = attr == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED         ? state.vmm_supported
           : attr == CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? state.host_vmm
                                                                                 : 0;
  return CUDA_SUCCESS;
}
CUresult device_total_mem(std::size_t* bytes, CUdevice) {
  *bytes = state.total_bytes;
  return CUDA_SUCCESS;
}
CUresult primary_ctx_retain(CUcontext* ctx, CUdevice) {
  ++state.primary_retains;
  *ctx = primary_ctx;
  return CUDA_SUCCESS;
}
CUresult primary_ctx_release(CUdevice) {
  --state.primary_retains;
  return CUDA_SUCCESS;
}
CUresult ctx_get_current(CUcontext* ctx) {
  *ctx = state.ctx_stack.empty() ? nullptr : state.ctx_stack.back();
  return CUDA_SUCCESS;
}
CUresult ctx_push_current(CUcontext ctx) {
  hit("cuCtxPushCurrent");
  state.ctx_stack.push_back(ctx);
  return CUDA_SUCCESS;
}
CUresult ctx_pop_current(CUcontext* ctx) {
  if (state.ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = state.ctx_stack.back();
  state.ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
CUresult ctx_synchronize() { return hit("cuCtxSynchronize"); }
CUresult mem_get_info(std::size_t* free, std::size_t* total) {
  *free = state.total_bytes - state.used_bytes;
  *total = state.total_bytes;
  return CUDA_SUCCESS;
}
CUresult mem_get_allocation_granularity(std::size_t* granularity, const CUmemAllocationProp* prop,
                                        CUmemAllocationGranularity_flags) {
  const bool host = prop->location.type == CU_MEM_LOCATION_TYPE_HOST && state.host_vmm != 0;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE && !host)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = state.granularity_bytes;
  return CUDA_SUCCESS;
}
CUresult mem_address_reserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr, unsigned long long) {
  if (const CUresult r = hit("cuMemAddressReserve"); r != CUDA_SUCCESS) return r;
  if (size == 0 || size % state.granularity_bytes != 0) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t align = alignment == 0 ? state.granularity_bytes : alignment;
  const CUdeviceptr base = (state.next_va + align - 1) / align * align;
  state.reservations.emplace(base, size);
  state.next_va = base + size + state.granularity_bytes;
  *ptr = base;
  return CUDA_SUCCESS;
}
CUresult mem_address_free(CUdeviceptr ptr, std::size_t size) {
  if (const CUresult r = hit("cuMemAddressFree"); r != CUDA_SUCCESS) return r;
  const auto it = state.reservations.find(ptr);
  if (it == state.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  const auto m = state.mappings.lower_bound(ptr);
  if (m != state.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
  state.reservations.erase(it);
  return CUDA_SUCCESS;
}
CUresult mem_create(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
                    unsigned long long) {
  if (const CUresult r = hit("cuMemCreate"); r != CUDA_SUCCESS) return r;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || size % state.granularity_bytes != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST) {  // host memory: not the device's
    if (state.host_vmm == 0) return CUDA_ERROR_NOT_SUPPORTED;
    *handle = state.next_handle++;
    state.handles.emplace(*handle, handle_state{.size_bytes = size});
    state.host_handles.insert(*handle);
    return CUDA_SUCCESS;
  }
  if (size > state.total_bytes - state.used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  *handle = state.next_handle++;
  state.handles.emplace(*handle, handle_state{.size_bytes = size});
  state.used_bytes += size;
  return CUDA_SUCCESS;
}
CUresult mem_release(CUmemGenericAllocationHandle handle) {
  if (const CUresult r = hit("cuMemRelease"); r != CUDA_SUCCESS) return r;
  const auto it = state.handles.find(handle);
  if (it == state.handles.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  free_if_unused(handle);
  return CUDA_SUCCESS;
}
CUresult mem_map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
                 unsigned long long) {
  if (const CUresult r = hit("cuMemMap"); r != CUDA_SUCCESS) return r;
  const auto h = state.handles.find(handle);
  if (h == state.handles.end() || h->second.released || offset != 0) return CUDA_ERROR_INVALID_VALUE;
  // A device handle maps whole (cuda_vmm's rule); a kept host handle may be larger than its range.
  if (state.host_handles.contains(handle) ? size > h->second.size_bytes : size != h->second.size_bytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto res = state.reservations.upper_bound(ptr);
  if (res == state.reservations.begin() || ptr + size > std::prev(res)->first + std::prev(res)->second) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto next = state.mappings.lower_bound(ptr);
  if (next != state.mappings.end() && next->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  if (next != state.mappings.begin() && std::prev(next)->first + std::prev(next)->second.size_bytes > ptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  state.mappings.emplace(ptr, mapping_state{.size_bytes = size, .handle = handle});
  ++h->second.mappings;
  return CUDA_SUCCESS;
}
CUresult mem_unmap(CUdeviceptr ptr, std::size_t size) {
  if (const CUresult r = hit("cuMemUnmap"); r != CUDA_SUCCESS) return r;
  const auto it = state.mappings.find(ptr);  // the driver unmaps whole mappings only
  if (it == state.mappings.end() || it->second.size_bytes != size) return CUDA_ERROR_INVALID_VALUE;
  const CUmemGenericAllocationHandle handle = it->second.handle;
  state.mappings.erase(it);
  --state.handles.at(handle).mappings;
  free_if_unused(handle);
  return CUDA_SUCCESS;
}
CUresult mem_set_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count) {
  if (const CUresult r = hit("cuMemSetAccess"); r != CUDA_SUCCESS) return r;
  if (count == 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<int> devices;
  for (std::size_t i = 0; i < count; ++i) {
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE || desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    devices.push_back(desc[i].location.id);
  }
  for (CUdeviceptr at = ptr; at < ptr + size;) {  // the range must be wholly mapped
    const auto it = state.mappings.find(at);
    if (it == state.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    at += it->second.size_bytes;
  }
  state.access_calls.emplace_back(ptr, size);
  state.access_devices.push_back(std::move(devices));
  return CUDA_SUCCESS;
}
CUresult event_create(CUevent* event, unsigned int) {
  if (const CUresult r = hit("cuEventCreate"); r != CUDA_SUCCESS) return r;
  *event = reinterpret_cast<CUevent>(state.next_event += 16);
  state.events.insert(*event);
  return CUDA_SUCCESS;
}
CUresult event_record(CUevent event, CUstream stream) {
  if (const CUresult r = hit("cuEventRecord"); r != CUDA_SUCCESS) return r;
  if (!state.events.contains(event)) return CUDA_ERROR_INVALID_HANDLE;
  state.recorded_streams.push_back(stream);
  return CUDA_SUCCESS;
}
CUresult event_query(CUevent event) {
  if (!state.events.contains(event)) return CUDA_ERROR_INVALID_HANDLE;
  return state.event_query_result;
}
CUresult event_synchronize(CUevent event) {
  if (const CUresult r = hit("cuEventSynchronize"); r != CUDA_SUCCESS) return r;
  return state.events.contains(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult event_destroy(CUevent event) { return state.events.erase(event) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult stream_create(CUstream* stream, unsigned int) {
  if (const CUresult r = hit("cuStreamCreate"); r != CUDA_SUCCESS) return r;
  *stream = reinterpret_cast<CUstream>(state.next_event += 16);
  state.streams.insert(*stream);
  return CUDA_SUCCESS;
}
CUresult stream_destroy(CUstream stream) {
  return state.streams.erase(stream) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult stream_wait_event(CUstream, CUevent event, unsigned int) {
  if (const CUresult r = hit("cuStreamWaitEvent"); r != CUDA_SUCCESS) return r;
  return state.events.contains(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
CUresult stream_synchronize(CUstream) { return hit("cuStreamSynchronize"); }
/// Whether [ptr, ptr+bytes) is wholly mapped, or lies inside one page-locked buffer.
bool reachable(CUdeviceptr ptr, std::size_t bytes) {
  for (const auto& [p, n] : state.pinned) {
    const auto at = reinterpret_cast<CUdeviceptr>(p);
    if (ptr >= at && ptr + bytes <= at + n) return true;
  }
  auto it = state.mappings.upper_bound(ptr);
  if (it == state.mappings.begin()) return false;
  --it;
  for (CUdeviceptr at = it->first; at < ptr + bytes;) {
    const auto m = state.mappings.find(at);
    if (m == state.mappings.end()) return false;
    at += m->second.size_bytes;
  }
  return true;
}
CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  if (const CUresult r = hit("cuMemcpyAsync"); r != CUDA_SUCCESS) return r;
  if (!reachable(dst, bytes) || !reachable(src, bytes)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  state.copies.push_back(copy_call{dst, src, bytes, stream});
  return CUDA_SUCCESS;
}
CUresult mem_host_alloc(void** p, std::size_t bytes, unsigned int) {
  if (const CUresult r = hit("cuMemHostAlloc"); r != CUDA_SUCCESS) return r;
  *p = reinterpret_cast<void*>(state.next_va);  // fake addresses: nothing reads them
  state.next_va += bytes + state.granularity_bytes;
  state.pinned.emplace(*p, bytes);
  return CUDA_SUCCESS;
}
CUresult mem_free_host(void* p) { return state.pinned.erase(p) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

/// The fake's entry points; `offload`: with the optional ones offload needs (host-located handles
/// when state.host_vmm, page-locked buffers otherwise).
detail::cuda_driver_api table(bool offload = false) {
  detail::cuda_driver_api api;
  api.init = init;
  api.get_error_name = get_error_name;
  api.device_get = device_get;
  api.device_get_attribute = device_get_attribute;
  api.device_total_mem = device_total_mem;
  api.primary_ctx_retain = primary_ctx_retain;
  api.primary_ctx_release = primary_ctx_release;
  api.ctx_get_current = ctx_get_current;
  api.ctx_push_current = ctx_push_current;
  api.ctx_pop_current = ctx_pop_current;
  api.ctx_synchronize = ctx_synchronize;
  api.mem_get_info = mem_get_info;
  api.mem_get_allocation_granularity = mem_get_allocation_granularity;
  api.mem_address_reserve = mem_address_reserve;
  api.mem_address_free = mem_address_free;
  api.mem_create = mem_create;
  api.mem_release = mem_release;
  api.mem_map = mem_map;
  api.mem_unmap = mem_unmap;
  api.mem_set_access = mem_set_access;
  api.event_create = event_create;
  api.event_record = event_record;
  api.event_query = event_query;
  api.event_synchronize = event_synchronize;
  api.event_destroy = event_destroy;
  if (offload) {
    api.stream_create = stream_create;
    api.stream_destroy = stream_destroy;
    api.stream_wait_event = stream_wait_event;
    api.stream_synchronize = stream_synchronize;
    api.memcpy_async = memcpy_async;
    api.mem_host_alloc = mem_host_alloc;
    api.mem_free_host = mem_free_host;
  }
  return api;
}

/// Makes call `nth` (1-based, counted from now on) of `entry` answer `result`.
void fail_call(const std::string& entry, int nth, CUresult result) {
  state.failures[entry] = {state.calls[entry] + nth, result};
}

}  // namespace fake

// --- the device on the fake ---------------------------------------------------------------------

class CudaVmmFakeDriverTest : public ::testing::Test {
 protected:
  void SetUp() override { fake::state = fake::driver_state{}; }

  std::unique_ptr<cuda_vmm_device> make(cuda_vmm_options options = {}, bool offload = false) {
    std::string why;
    auto made = cuda_vmm_device::create_with_driver(fake::table(offload), 0, options, &why);
    EXPECT_TRUE(made) << why;
    return made ? std::move(made).value() : nullptr;
  }
  /// The error a creation answers, with its reason in `why`.
  errc creation_error(std::string& why, cuda_vmm_options options = {}) {
    auto made = cuda_vmm_device::create_with_driver(fake::table(), 0, options, &why);
    return made ? errc::ok : made.error();
  }

  static constexpr std::size_t page = 2 * mib;
};

TEST_F(CudaVmmFakeDriverTest, TakesGranularityAndCapacityFromTheDriver) {
  auto dev = make();
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->name(), "cuda_vmm");
  EXPECT_EQ(dev->caps().granularity_bytes, page);
  EXPECT_EQ(dev->caps().capacity_bytes, 64 * mib);
  EXPECT_TRUE(dev->caps().has_virtual_reserve);
  EXPECT_TRUE(dev->caps().has_partial_unmap);
  EXPECT_EQ(dev->free_bytes(), 64 * mib);
  EXPECT_EQ(fake::state.primary_retains, 1);
  dev.reset();
  EXPECT_EQ(fake::state.primary_retains, 0) << "the primary context is released with the device";
}

TEST_F(CudaVmmFakeDriverTest, AnswersNotSupportedWithoutVirtualMemoryManagement) {
  fake::state.vmm_supported = 0;
  std::string why;
  EXPECT_EQ(creation_error(why), errc::not_supported);
  EXPECT_NE(why.find("virtual memory management"), std::string::npos) << why;
  EXPECT_EQ(fake::state.primary_retains, 0);
}

TEST_F(CudaVmmFakeDriverTest, AnswersNotSupportedWhenTheDriverFindsNoDevice) {
  fake::state.init_result = CUDA_ERROR_NO_DEVICE;
  std::string why;
  EXPECT_EQ(creation_error(why), errc::not_supported);
  EXPECT_NE(why.find("cuInit returned CUDA_ERROR_NO_DEVICE"), std::string::npos) << why;
}

TEST_F(CudaVmmFakeDriverTest, AnswersInvalidArgumentForAnOrdinalOutOfRange) {
  fake::state.device_count = 0;
  std::string why;
  EXPECT_EQ(creation_error(why), errc::invalid_argument);
  EXPECT_NE(why.find("CUDA_ERROR_INVALID_DEVICE"), std::string::npos) << why;
}

TEST_F(CudaVmmFakeDriverTest, AnswersNotSupportedForAnIncompleteDriverTable) {
  detail::cuda_driver_api api = fake::table();
  api.mem_map = nullptr;
  std::string why;
  auto made = cuda_vmm_device::create_with_driver(api, 0, {}, &why);
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error(), errc::not_supported);
  EXPECT_NE(why.find("mem_map"), std::string::npos) << why;
}

TEST_F(CudaVmmFakeDriverTest, UsesALargerPowerOfTwoPageWhenAsked) {
  auto dev = make({.page_bytes = 8 * mib});
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->caps().granularity_bytes, 8 * mib);
  auto base = dev->reserve(16 * mib);
  ASSERT_TRUE(base);
  EXPECT_EQ(base.value() % (8 * mib), 0u);
  EXPECT_EQ(dev->map(base.value(), 16 * mib), errc::ok);
  EXPECT_EQ(fake::state.calls["cuMemCreate"], 2) << "one handle per 8 MiB page";

  std::string why;
  EXPECT_EQ(creation_error(why, {.page_bytes = 6 * mib}), errc::invalid_argument);
  EXPECT_NE(why.find("page_bytes"), std::string::npos) << why;
  EXPECT_EQ(creation_error(why, {.page_bytes = 3 * mib}), errc::invalid_argument);
}

TEST_F(CudaVmmFakeDriverTest, MapsOneHandlePerPageAndSetsAccessOnce) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(8 * page);
  ASSERT_TRUE(base);
  ASSERT_EQ(dev->map(base.value() + page, 4 * page), errc::ok);
  EXPECT_EQ(fake::state.calls["cuMemCreate"], 4);
  EXPECT_EQ(fake::state.calls["cuMemMap"], 4);
  ASSERT_EQ(fake::state.access_calls.size(), 1u);
  EXPECT_EQ(fake::state.access_calls[0].first, base.value() + page);
  EXPECT_EQ(fake::state.access_calls[0].second, 4 * page);
  EXPECT_EQ(fake::state.handles.size(), 4u);
  EXPECT_EQ(dev->mapped_bytes(), 4 * page);
  EXPECT_EQ(dev->free_bytes(), 64 * mib - 4 * page);
}

TEST_F(CudaVmmFakeDriverTest, GrantsAPeerTheMappedRunsAndEveryLaterMap) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(8 * page);
  ASSERT_TRUE(base);
  ASSERT_EQ(dev->map(base.value(), 2 * page), errc::ok);
  ASSERT_EQ(dev->map(base.value() + 4 * page, page), errc::ok);
  EXPECT_EQ(fake::state.access_devices, (std::vector<std::vector<int>>{{0}, {0}}));
  ASSERT_EQ(dev->grant_peer_access(1), errc::ok);
  ASSERT_EQ(fake::state.access_calls.size(), 4u);  // one call per run of mapped pages
  EXPECT_EQ(fake::state.access_calls[2], std::pair(static_cast<CUdeviceptr>(base.value()), 2 * page));
  EXPECT_EQ(fake::state.access_calls[3], std::pair(static_cast<CUdeviceptr>(base.value() + 4 * page), page));
  EXPECT_EQ(fake::state.access_devices[2], std::vector<int>{1});
  ASSERT_EQ(dev->grant_peer_access(1), errc::ok);  // once is enough
  ASSERT_EQ(dev->grant_peer_access(0), errc::ok);  // the device itself
  EXPECT_EQ(fake::state.access_calls.size(), 4u);
  ASSERT_EQ(dev->map(base.value() + 6 * page, page), errc::ok);
  EXPECT_EQ(fake::state.access_devices.back(), (std::vector<int>{0, 1}));  // later maps name the peer
}

TEST_F(CudaVmmFakeDriverTest, RollsBackAMapWhoseThirdCuMemCreateRunsOutOfMemory) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(8 * page);
  ASSERT_TRUE(base);
  fake::fail_call("cuMemCreate", 3, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(dev->map(base.value(), 4 * page), errc::out_of_memory);
  EXPECT_EQ(dev->last_failure(), "cuMemCreate(2097152) failed: CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_TRUE(fake::state.handles.empty()) << "the two pages mapped before the failure were released";
  EXPECT_TRUE(fake::state.mappings.empty());
  EXPECT_EQ(fake::state.used_bytes, 0u);
  EXPECT_EQ(dev->mapped_bytes(), 0u);
  EXPECT_EQ(dev->map(base.value(), 4 * page), errc::ok) << "the range is whole again";
}

TEST_F(CudaVmmFakeDriverTest, RollsBackAMapWhenCuMemMapFails) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  fake::fail_call("cuMemMap", 2, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(dev->map(base.value(), 4 * page), errc::device_refused);
  EXPECT_NE(dev->last_failure().find("cuMemMap("), std::string::npos) << dev->last_failure();
  EXPECT_TRUE(fake::state.handles.empty()) << "including the handle whose map failed";
  EXPECT_TRUE(fake::state.mappings.empty());
  EXPECT_EQ(dev->release(base.value(), 4 * page), errc::ok);
}

TEST_F(CudaVmmFakeDriverTest, RollsBackAMapWhenCuMemSetAccessFails) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  fake::fail_call("cuMemSetAccess", 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(dev->map(base.value(), 3 * page), errc::out_of_memory);
  EXPECT_TRUE(fake::state.handles.empty());
  EXPECT_TRUE(fake::state.mappings.empty());
  EXPECT_EQ(dev->mapped_bytes(), 0u);
}

TEST_F(CudaVmmFakeDriverTest, UnmapsASubrangeAndReleasesItsHandles) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  ASSERT_EQ(dev->map(base.value(), 4 * page), errc::ok);
  ASSERT_EQ(dev->unmap(base.value() + page, 2 * page), errc::ok);
  EXPECT_EQ(fake::state.handles.size(), 2u);
  EXPECT_EQ(fake::state.mappings.size(), 2u);
  EXPECT_TRUE(fake::state.mappings.contains(base.value()));
  EXPECT_TRUE(fake::state.mappings.contains(base.value() + 3 * page));
  EXPECT_EQ(fake::state.used_bytes, 2 * page);
  EXPECT_EQ(dev->mapped_bytes(), 2 * page);
}

TEST_F(CudaVmmFakeDriverTest, MapsPagesBackWhenAnUnmapFails) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  ASSERT_EQ(dev->map(base.value(), 4 * page), errc::ok);
  const auto handles_before = fake::state.mappings;
  fake::fail_call("cuMemUnmap", 3, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(dev->unmap(base.value(), 4 * page), errc::device_refused);
  EXPECT_EQ(dev->last_failure(), fmt::format("cuMemUnmap({:#x}, {}) failed: CUDA_ERROR_ILLEGAL_ADDRESS",
                                             base.value() + 2 * page, page));
  ASSERT_EQ(fake::state.mappings.size(), 4u) << "the two pages unmapped first were mapped back";
  for (const auto& [at, m] : handles_before) EXPECT_EQ(fake::state.mappings.at(at).handle, m.handle) << "same handle";
  EXPECT_EQ(dev->mapped_bytes(), 4 * page);
  EXPECT_EQ(dev->unmap(base.value(), 4 * page), errc::ok);
  EXPECT_TRUE(fake::state.handles.empty());
}

TEST_F(CudaVmmFakeDriverTest, AnswersOutOfMemoryWhenTheAddressSpaceRunsOut) {
  auto dev = make();
  ASSERT_TRUE(dev);
  fake::fail_call("cuMemAddressReserve", 1, CUDA_ERROR_OUT_OF_MEMORY);
  auto base = dev->reserve(4 * page);
  ASSERT_FALSE(base);
  EXPECT_EQ(base.error(), errc::out_of_memory);
  EXPECT_EQ(dev->live_reservations(), 0u);
}

TEST_F(CudaVmmFakeDriverTest, KeepsTheReservationWhenCuMemAddressFreeFails) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  fake::fail_call("cuMemAddressFree", 1, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(dev->release(base.value(), 4 * page), errc::device_refused);
  EXPECT_EQ(dev->live_reservations(), 1u);
  EXPECT_EQ(dev->release(base.value(), 4 * page), errc::ok);
}

TEST_F(CudaVmmFakeDriverTest, AnswersCallerErrorsWithoutCallingTheDriver) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto base = dev->reserve(4 * page);
  ASSERT_TRUE(base);
  const int reserves = fake::state.calls["cuMemAddressReserve"];
  EXPECT_FALSE(dev->reserve(page + 1));
  EXPECT_EQ(dev->map(base.value() + 1, page), errc::invalid_argument);
  EXPECT_EQ(dev->map(base.value() + 3 * page, 2 * page), errc::invalid_argument);
  EXPECT_EQ(dev->unmap(base.value(), page), errc::invalid_argument);
  EXPECT_EQ(dev->release(base.value(), 2 * page), errc::invalid_argument);
  EXPECT_EQ(fake::state.calls["cuMemAddressReserve"], reserves);
  EXPECT_EQ(fake::state.calls["cuMemCreate"], 0);
  EXPECT_EQ(fake::state.calls["cuMemUnmap"], 0);
  EXPECT_EQ(fake::state.calls["cuMemAddressFree"], 0);
  EXPECT_EQ(dev->last_failure(), "");
}

TEST_F(CudaVmmFakeDriverTest, PushesThePrimaryContextOnlyWhenItIsNotCurrent) {
  auto dev = make();
  ASSERT_TRUE(dev);
  ASSERT_TRUE(dev->reserve(page));
  EXPECT_EQ(fake::state.calls["cuCtxPushCurrent"], 1);
  EXPECT_TRUE(fake::state.ctx_stack.empty()) << "pushed and popped";

  fake::state.ctx_stack.push_back(fake::primary_ctx);  // as after the runtime made it current
  ASSERT_TRUE(dev->reserve(page));
  EXPECT_EQ(fake::state.calls["cuCtxPushCurrent"], 1);
  ASSERT_EQ(fake::state.ctx_stack.size(), 1u);
}

TEST_F(CudaVmmFakeDriverTest, PassesStreamsToTheDriverAndReadsNotReadyAsIncomplete) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto e = dev->create_event();
  ASSERT_TRUE(e);
  ASSERT_EQ(dev->record_event(e.value(), 0x1234), errc::ok);
  ASSERT_EQ(fake::state.recorded_streams.size(), 1u);
  EXPECT_EQ(fake::state.recorded_streams[0], reinterpret_cast<CUstream>(std::uintptr_t{0x1234}));
  fake::state.event_query_result = CUDA_ERROR_NOT_READY;
  auto q = dev->query_event(e.value());
  ASSERT_TRUE(q);
  EXPECT_FALSE(q.value());
  fake::state.event_query_result = CUDA_ERROR_ILLEGAL_ADDRESS;
  auto broken = dev->query_event(e.value());
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error(), errc::device_refused);
  fake::fail_call("cuCtxSynchronize", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(dev->synchronize(), errc::device_refused);
  EXPECT_EQ(dev->last_failure(), "cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS");
}

TEST_F(CudaVmmFakeDriverTest, ReturnsEverythingWhenDestroyed) {
  auto dev = make();
  ASSERT_TRUE(dev);
  auto a = dev->reserve(4 * page);
  auto b = dev->reserve(2 * page);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(dev->map(a.value() + page, 2 * page), errc::ok);
  ASSERT_EQ(dev->map(b.value(), 2 * page), errc::ok);
  ASSERT_TRUE(dev->create_event());
  dev.reset();
  EXPECT_TRUE(fake::state.mappings.empty());
  EXPECT_TRUE(fake::state.handles.empty());
  EXPECT_TRUE(fake::state.reservations.empty());
  EXPECT_TRUE(fake::state.events.empty());
  EXPECT_EQ(fake::state.used_bytes, 0u);
  EXPECT_EQ(fake::state.primary_retains, 0);
  EXPECT_TRUE(fake::state.ctx_stack.empty());
}

// --- same-address offload on the fake: the failure paths a GPU cannot be made to take -----------

/// Whether the fake maps a device handle at `at` (not a host-located one).
bool device_mapped_at(CUdeviceptr at) {
  const auto it = fake::state.mappings.find(at);
  return it != fake::state.mappings.end() && !fake::state.host_handles.contains(it->second.handle);
}

bool host_mapped_at(CUdeviceptr at) {
  const auto it = fake::state.mappings.find(at);
  return it != fake::state.mappings.end() && fake::state.host_handles.contains(it->second.handle);
}

TEST_F(CudaVmmFakeDriverTest, AnOffloadWhoseHostMappingFailsMapsTheDevicePagesBack) {
  auto dev = make({}, /*offload=*/true);
  ASSERT_TRUE(dev && dev->caps().has_host_backing && !dev->caps().offload_unmaps);
  const device_address base = dev->reserve(2 * page).value();
  ASSERT_EQ(dev->map(base, 2 * page), errc::ok);
  const std::size_t used = fake::state.used_bytes;
  const std::vector<byte_range> live{{base, 100}};
  // The start maps the host handle at a staging range (cuMemMap 1); the finish's map over the range fails.
  ASSERT_EQ(dev->offload_start(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  fake::fail_call("cuMemMap", 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(dev->finish_move(base, {}), errc::out_of_memory);
  EXPECT_NE(dev->last_failure().find("moving"), std::string::npos) << dev->last_failure();
  EXPECT_TRUE(device_mapped_at(base) && device_mapped_at(base + page)) << "the device pages were not mapped back";
  EXPECT_EQ(fake::state.used_bytes, used);  // the device handles were kept, not released
  EXPECT_EQ(dev->mapped_bytes(), 2 * page);
  EXPECT_EQ(dev->host_backed_bytes(), 0u);
  EXPECT_EQ(dev->moves_in_flight(), 0u);
  EXPECT_EQ(dev->moved().to_host, 0u);
  // Nothing was lost: the same offload succeeds now, with the kept host handle.
  const std::size_t host_handles = fake::state.host_handles.size();
  ASSERT_EQ(dev->offload(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_EQ(fake::state.host_handles.size(), host_handles);
  EXPECT_TRUE(host_mapped_at(base));
  EXPECT_EQ(fake::state.used_bytes, used - 2 * page);
}

TEST_F(CudaVmmFakeDriverTest, AnOffloadWhoseFinishCannotWaitStaysInFlightWithItsDevicePages) {
  auto dev = make({}, /*offload=*/true);
  ASSERT_TRUE(dev);
  const device_address base = dev->reserve(page).value();
  ASSERT_EQ(dev->map(base, page), errc::ok);
  ASSERT_EQ(dev->offload_start(base, page, std::vector<byte_range>{{base, page}}, {}), errc::ok);
  fake::fail_call("cuEventSynchronize", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(dev->finish_move(base, {}), errc::device_refused);
  EXPECT_EQ(dev->moves_in_flight(), 1u);  // the copies' fate is unknown: nothing is dropped
  EXPECT_TRUE(device_mapped_at(base));
  EXPECT_EQ(dev->unmap(base, page), errc::invalid_argument);  // not under a move in flight
  ASSERT_EQ(dev->finish_move(base, {}), errc::ok) << dev->last_failure();
  EXPECT_TRUE(host_mapped_at(base));
  EXPECT_EQ(dev->moved().to_host, page);
}

TEST_F(CudaVmmFakeDriverTest, ARestoreWhoseDeviceMappingFailsPutsTheHostMappingBack) {
  auto dev = make({.restore_chunk_bytes = page}, /*offload=*/true);  // a handle per page
  ASSERT_TRUE(dev);
  const device_address base = dev->reserve(3 * page).value();
  ASSERT_EQ(dev->map(base, 3 * page), errc::ok);
  const std::vector<byte_range> live{{base, 3 * page}};
  ASSERT_EQ(dev->offload(base, 3 * page, live, {}), errc::ok) << dev->last_failure();
  const std::size_t used = fake::state.used_bytes;
  // restore: the staging map (1), then the device chunks (2, 3, 4): the third chunk's map fails.
  fake::fail_call("cuMemMap", 4, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(dev->restore(base, 3 * page, live, {}), errc::device_refused);
  EXPECT_NE(dev->last_failure().find("mapping device pages"), std::string::npos) << dev->last_failure();
  EXPECT_TRUE(host_mapped_at(base)) << "the bytes' host mapping did not come back";
  EXPECT_FALSE(device_mapped_at(base + page));
  EXPECT_EQ(fake::state.used_bytes, used);  // the chunks made for it were released
  EXPECT_EQ(dev->host_backed_bytes(), 3 * page);
  EXPECT_EQ(dev->mapped_bytes(), 0u);
  ASSERT_EQ(dev->restore(base, 3 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_TRUE(device_mapped_at(base) && device_mapped_at(base + 2 * page));
  EXPECT_EQ(dev->moved().to_device, 3 * page);
}

TEST_F(CudaVmmFakeDriverTest, WithoutHostBackingAnOffloadUnmapsTheRangeAndCopiesThroughAPinnedBuffer) {
  fake::state.host_vmm = 0;
  auto dev = make({}, /*offload=*/true);
  ASSERT_TRUE(dev);
  EXPECT_FALSE(dev->caps().has_host_backing);
  EXPECT_TRUE(dev->caps().offload_unmaps);
  const device_address base = dev->reserve(2 * page).value();
  ASSERT_EQ(dev->map(base, 2 * page), errc::ok);
  const std::size_t used = fake::state.used_bytes;
  const std::vector<byte_range> live{{base + 64, 1000}, {base + page, 4096}};
  ASSERT_EQ(dev->offload(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  ASSERT_EQ(fake::state.pinned.size(), 1u);
  const auto buffer = reinterpret_cast<CUdeviceptr>(fake::state.pinned.begin()->first);
  EXPECT_EQ(fake::state.pinned.begin()->second, 2 * page);  // the range's bytes, no rounding
  ASSERT_EQ(fake::state.copies.size(), 2u);  // the live ranges only, into the buffer at their offsets
  EXPECT_EQ(fake::state.copies[0].dst, buffer + 64);
  EXPECT_EQ(fake::state.copies[1].dst, buffer + page);
  EXPECT_EQ(fake::state.copies[1].bytes, 4096u);
  EXPECT_FALSE(device_mapped_at(base) || host_mapped_at(base) || device_mapped_at(base + page));  // unmapped
  EXPECT_TRUE(fake::state.host_handles.empty());
  EXPECT_EQ(fake::state.used_bytes, used - 2 * page);
  EXPECT_EQ(dev->host_backed_bytes(), 2 * page);
  EXPECT_EQ(dev->map(base, page), errc::invalid_argument);  // offloaded, not free address space

  const int host_waits = fake::state.calls["cuStreamSynchronize"];
  ASSERT_EQ(dev->restore(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_EQ(fake::state.calls["cuStreamSynchronize"], host_waits) << "a restore of an unmapped range waited on the host";
  ASSERT_EQ(fake::state.copies.size(), 4u);
  EXPECT_EQ(fake::state.copies[2].src, buffer + 64);
  EXPECT_EQ(fake::state.copies[2].dst, base + 64);
  EXPECT_TRUE(device_mapped_at(base));
  EXPECT_EQ(dev->host_held_bytes(), 2 * page);  // the buffer is kept for the next offload
  ASSERT_EQ(dev->offload(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_EQ(fake::state.calls["cuMemHostAlloc"], 1) << "the second offload pinned anew";
  EXPECT_EQ(dev->unmap(base, 2 * page), errc::ok);  // a free while offloaded: its buffer is kept
  EXPECT_EQ(dev->host_backed_bytes(), 0u);
  EXPECT_EQ(dev->release(base, 2 * page), errc::ok);
  dev.reset();
  EXPECT_TRUE(fake::state.pinned.empty()) << "a pinned buffer outlived the device";
  EXPECT_TRUE(fake::state.streams.empty());
}

TEST_F(CudaVmmFakeDriverTest, WithoutHostBackingFailuresLeaveTheRangeAsItWas) {
  fake::state.host_vmm = 0;
  auto dev = make({.restore_chunk_bytes = page}, /*offload=*/true);
  ASSERT_TRUE(dev);
  const device_address base = dev->reserve(2 * page).value();
  ASSERT_EQ(dev->map(base, 2 * page), errc::ok);
  const std::vector<byte_range> live{{base, 2 * page}};
  fake::fail_call("cuMemHostAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(dev->offload(base, 2 * page, live, {}), errc::out_of_memory);
  EXPECT_NE(dev->last_failure().find("cuMemHostAlloc"), std::string::npos) << dev->last_failure();
  EXPECT_TRUE(device_mapped_at(base));
  EXPECT_EQ(dev->mapped_bytes(), 2 * page);
  ASSERT_EQ(dev->offload(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  // A restore whose second chunk cannot be mapped leaves the range unmapped, its bytes in the buffer.
  fake::fail_call("cuMemMap", 2, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(dev->restore(base, 2 * page, live, {}), errc::device_refused);
  EXPECT_FALSE(device_mapped_at(base) || device_mapped_at(base + page));
  EXPECT_EQ(dev->host_backed_bytes(), 2 * page);
  EXPECT_EQ(fake::state.pinned.size(), 1u);
  ASSERT_EQ(dev->restore(base, 2 * page, live, {}), errc::ok) << dev->last_failure();
  EXPECT_TRUE(device_mapped_at(base) && device_mapped_at(base + page));
}

}  // namespace

// --- the conformance suite on the fake ------------------------------------------------------------

namespace conformance {
namespace {

made_device make_on_fake_driver(bool offload, int host_vmm) {
  fake::state = fake::driver_state{};
  fake::state.host_vmm = host_vmm;
  std::string why;
  auto made = cuda_vmm_device::create_with_driver(fake::table(offload), 0, {}, &why);
  if (!made) return {nullptr, why};
  return {std::move(made).value(), {}};
}

made_device make_vmm_on_fake_driver() { return make_on_fake_driver(false, 1); }
made_device make_host_backed_vmm_on_fake_driver() { return make_on_fake_driver(true, 1); }
made_device make_unmapping_vmm_on_fake_driver() { return make_on_fake_driver(true, 0); }

INSTANTIATE_TEST_SUITE_P(FakeDriver, DeviceConformanceTest,
                         ::testing::Values(device_factory{"cuda_vmm", make_vmm_on_fake_driver, true},
                                           device_factory{"cuda_vmm_host_backed", make_host_backed_vmm_on_fake_driver,
                                                          true},
                                           device_factory{"cuda_vmm_unmapping", make_unmapping_vmm_on_fake_driver,
                                                          true}),
                         device_factory_name);

}  // namespace
}  // namespace conformance
}  // namespace phasealloc
