// A fake CUDA driver for cuda_vmm_device's tests (fmt's posix-mock in spirit): it keeps the
// driver's own books (reservations, handles, mappings, contexts, events, streams, copies,
// page-locked buffers) so a test can see exactly what the device left behind, and fails call N of
// any entry point with the CUresult a test asks for. Used by cuda_vmm_fake_driver_test.cpp (the
// device, and the conformance suite on it) and cuda_vmm_fake_offload_test.cpp (offload's failure
// paths), one binary each.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cuda_driver_api.hpp"
#include "phasealloc/devices/cuda_vmm_device.hpp"

namespace phasealloc {

namespace fake {

inline const CUcontext primary_ctx = reinterpret_cast<CUcontext>(std::uintptr_t{0xc0});

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

inline driver_state state;

/// Counts a call of `entry` and answers the failure a test planted for this call, if any.
inline CUresult hit(const char* entry) {
  const int n = ++state.calls[entry];
  const auto it = state.failures.find(entry);
  if (it != state.failures.end() && it->second.first == n) return it->second.second;
  return CUDA_SUCCESS;
}

inline void free_if_unused(CUmemGenericAllocationHandle h) {
  const auto it = state.handles.find(h);
  if (it->second.released && it->second.mappings == 0) {
    if (state.host_handles.erase(h) == 0) state.used_bytes -= it->second.size_bytes;
    state.handles.erase(it);
  }
}

inline CUresult init(unsigned int) {
  if (const CUresult r = hit("cuInit"); r != CUDA_SUCCESS) return r;
  return state.init_result;
}
inline CUresult get_error_name(CUresult r, const char** name) {
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
inline CUresult device_get(CUdevice* dev, int ordinal) {
  if (ordinal < 0 || ordinal >= state.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}
inline CUresult device_get_attribute(int* value, CUdevice_attribute attr, CUdevice) {
  *value = attr == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED         ? state.vmm_supported
           : attr == CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? state.host_vmm
                                                                                 : 0;
  return CUDA_SUCCESS;
}
inline CUresult device_total_mem(std::size_t* bytes, CUdevice) {
  *bytes = state.total_bytes;
  return CUDA_SUCCESS;
}
inline CUresult primary_ctx_retain(CUcontext* ctx, CUdevice) {
  ++state.primary_retains;
  *ctx = primary_ctx;
  return CUDA_SUCCESS;
}
inline CUresult primary_ctx_release(CUdevice) {
  --state.primary_retains;
  return CUDA_SUCCESS;
}
inline CUresult ctx_get_current(CUcontext* ctx) {
  *ctx = state.ctx_stack.empty() ? nullptr : state.ctx_stack.back();
  return CUDA_SUCCESS;
}
inline CUresult ctx_push_current(CUcontext ctx) {
  hit("cuCtxPushCurrent");
  state.ctx_stack.push_back(ctx);
  return CUDA_SUCCESS;
}
inline CUresult ctx_pop_current(CUcontext* ctx) {
  if (state.ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = state.ctx_stack.back();
  state.ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
inline CUresult ctx_synchronize() { return hit("cuCtxSynchronize"); }
inline CUresult mem_get_info(std::size_t* free, std::size_t* total) {
  *free = state.total_bytes - state.used_bytes;
  *total = state.total_bytes;
  return CUDA_SUCCESS;
}
inline CUresult mem_get_allocation_granularity(std::size_t* granularity, const CUmemAllocationProp* prop,
                                        CUmemAllocationGranularity_flags) {
  const bool host = prop->location.type == CU_MEM_LOCATION_TYPE_HOST && state.host_vmm != 0;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE && !host)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = state.granularity_bytes;
  return CUDA_SUCCESS;
}
inline CUresult mem_address_reserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr, unsigned long long) {
  if (const CUresult r = hit("cuMemAddressReserve"); r != CUDA_SUCCESS) return r;
  if (size == 0 || size % state.granularity_bytes != 0) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t align = alignment == 0 ? state.granularity_bytes : alignment;
  const CUdeviceptr base = (state.next_va + align - 1) / align * align;
  state.reservations.emplace(base, size);
  state.next_va = base + size + state.granularity_bytes;
  *ptr = base;
  return CUDA_SUCCESS;
}
inline CUresult mem_address_free(CUdeviceptr ptr, std::size_t size) {
  if (const CUresult r = hit("cuMemAddressFree"); r != CUDA_SUCCESS) return r;
  const auto it = state.reservations.find(ptr);
  if (it == state.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  const auto m = state.mappings.lower_bound(ptr);
  if (m != state.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
  state.reservations.erase(it);
  return CUDA_SUCCESS;
}
inline CUresult mem_create(CUmemGenericAllocationHandle* handle, std::size_t size, const CUmemAllocationProp* prop,
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
inline CUresult mem_release(CUmemGenericAllocationHandle handle) {
  if (const CUresult r = hit("cuMemRelease"); r != CUDA_SUCCESS) return r;
  const auto it = state.handles.find(handle);
  if (it == state.handles.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
  it->second.released = true;
  free_if_unused(handle);
  return CUDA_SUCCESS;
}
inline CUresult mem_map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle handle,
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
inline CUresult mem_unmap(CUdeviceptr ptr, std::size_t size) {
  if (const CUresult r = hit("cuMemUnmap"); r != CUDA_SUCCESS) return r;
  const auto it = state.mappings.find(ptr);  // the driver unmaps whole mappings only
  if (it == state.mappings.end() || it->second.size_bytes != size) return CUDA_ERROR_INVALID_VALUE;
  const CUmemGenericAllocationHandle handle = it->second.handle;
  state.mappings.erase(it);
  --state.handles.at(handle).mappings;
  free_if_unused(handle);
  return CUDA_SUCCESS;
}
inline CUresult mem_set_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count) {
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
inline CUresult event_create(CUevent* event, unsigned int) {
  if (const CUresult r = hit("cuEventCreate"); r != CUDA_SUCCESS) return r;
  *event = reinterpret_cast<CUevent>(state.next_event += 16);
  state.events.insert(*event);
  return CUDA_SUCCESS;
}
inline CUresult event_record(CUevent event, CUstream stream) {
  if (const CUresult r = hit("cuEventRecord"); r != CUDA_SUCCESS) return r;
  if (!state.events.contains(event)) return CUDA_ERROR_INVALID_HANDLE;
  state.recorded_streams.push_back(stream);
  return CUDA_SUCCESS;
}
inline CUresult event_query(CUevent event) {
  if (!state.events.contains(event)) return CUDA_ERROR_INVALID_HANDLE;
  return state.event_query_result;
}
inline CUresult event_synchronize(CUevent event) {
  if (const CUresult r = hit("cuEventSynchronize"); r != CUDA_SUCCESS) return r;
  return state.events.contains(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
inline CUresult event_destroy(CUevent event) { return state.events.erase(event) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
inline CUresult stream_create(CUstream* stream, unsigned int) {
  if (const CUresult r = hit("cuStreamCreate"); r != CUDA_SUCCESS) return r;
  *stream = reinterpret_cast<CUstream>(state.next_event += 16);
  state.streams.insert(*stream);
  return CUDA_SUCCESS;
}
inline CUresult stream_destroy(CUstream stream) {
  return state.streams.erase(stream) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
inline CUresult stream_wait_event(CUstream, CUevent event, unsigned int) {
  if (const CUresult r = hit("cuStreamWaitEvent"); r != CUDA_SUCCESS) return r;
  return state.events.contains(event) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
inline CUresult stream_synchronize(CUstream) { return hit("cuStreamSynchronize"); }
/// Whether [ptr, ptr+bytes) is wholly mapped, or lies inside one page-locked buffer.
inline bool reachable(CUdeviceptr ptr, std::size_t bytes) {
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
inline CUresult memcpy_async(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream) {
  if (const CUresult r = hit("cuMemcpyAsync"); r != CUDA_SUCCESS) return r;
  if (!reachable(dst, bytes) || !reachable(src, bytes)) return CUDA_ERROR_ILLEGAL_ADDRESS;
  state.copies.push_back(copy_call{dst, src, bytes, stream});
  return CUDA_SUCCESS;
}
inline CUresult mem_host_alloc(void** p, std::size_t bytes, unsigned int) {
  if (const CUresult r = hit("cuMemHostAlloc"); r != CUDA_SUCCESS) return r;
  *p = reinterpret_cast<void*>(state.next_va);  // fake addresses: nothing reads them
  state.next_va += bytes + state.granularity_bytes;
  state.pinned.emplace(*p, bytes);
  return CUDA_SUCCESS;
}
inline CUresult mem_free_host(void* p) { return state.pinned.erase(p) == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

/// The fake's entry points; `offload`: with the optional ones offload needs (host-located handles
/// when state.host_vmm, page-locked buffers otherwise).
inline detail::cuda_driver_api table(bool offload = false) {
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
inline void fail_call(const std::string& entry, int nth, CUresult result) {
  state.failures[entry] = {state.calls[entry] + nth, result};
}

}  // namespace fake

/// The device on the fake: each test starts from a fresh driver.
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

}  // namespace phasealloc
