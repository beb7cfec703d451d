// The CUDA driver entry points cuda_vmm_device calls, as one table of function pointers.
//
// Private to allocator/devices: it includes <cuda.h> (types and enums only; nothing here links
// libcuda). Tests reach it through the phasealloc::cuda_devices_testing target and fill the table
// with fakes (fmt's posix-mock in spirit), so the VMM device's books and error paths run on a
// machine without a GPU.
//
// Each member names the exact ABI variant it holds (the PFN_*_vNNNNN typedefs of cudaTypedefs.h);
// resolve_cuda_driver_api() asks the runtime for that variant with the same version number, so a
// newer driver that adds a variant (cuCtxSynchronize_v13000 takes a context) does not change
// what we call. Members are snake_case on purpose: <cuda.h> #defines many cu* names to their _v2.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "phasealloc/status.hpp"

namespace phasealloc::detail {

struct cuda_driver_api {
  PFN_cuInit_v2000 init = nullptr;
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuDeviceTotalMem_v3020 device_total_mem = nullptr;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain = nullptr;
  PFN_cuDevicePrimaryCtxRelease_v11000 primary_ctx_release = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuCtxPushCurrent_v4000 ctx_push_current = nullptr;
  PFN_cuCtxPopCurrent_v4000 ctx_pop_current = nullptr;
  PFN_cuCtxSynchronize_v2000 ctx_synchronize = nullptr;
  PFN_cuMemGetInfo_v3020 mem_get_info = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 mem_address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 mem_address_free = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  PFN_cuEventCreate_v2000 event_create = nullptr;
  PFN_cuEventRecord_v2000 event_record = nullptr;
  PFN_cuEventQuery_v2000 event_query = nullptr;
  PFN_cuEventSynchronize_v2000 event_synchronize = nullptr;
  PFN_cuEventDestroy_v4000 event_destroy = nullptr;
  // Offload (cuda_vmm_offload.cpp): optional; without them the device has no host backing.
  PFN_cuStreamCreate_v2000 stream_create = nullptr;
  PFN_cuStreamDestroy_v4000 stream_destroy = nullptr;
  PFN_cuStreamWaitEvent_v3020 stream_wait_event = nullptr;
  PFN_cuStreamSynchronize_v2000 stream_synchronize = nullptr;
  PFN_cuMemcpyAsync_v4000 memcpy_async = nullptr;
  // Offload where the driver cannot map host memory at device addresses (before CUDA 12.2):
  // pinned host memory the copies land in, the range unmapped meanwhile. Optional too.
  PFN_cuMemHostAlloc_v2020 mem_host_alloc = nullptr;
  PFN_cuMemFreeHost_v2000 mem_free_host = nullptr;
};

/// Whether `api` has the optional entries that offload needs.
inline bool has_offload_entries(const cuda_driver_api& api) noexcept {
  return api.stream_create != nullptr && api.stream_destroy != nullptr && api.stream_wait_event != nullptr &&
         api.stream_synchronize != nullptr && api.memcpy_async != nullptr;
}

/// Whether `api` has the optional entries of the unmapping offload (pinned host memory).
inline bool has_pinned_entries(const cuda_driver_api& api) noexcept {
  return has_offload_entries(api) && api.mem_host_alloc != nullptr && api.mem_free_host != nullptr;
}

/// Fills `api` from the installed driver through cudaGetDriverEntryPointByVersion (the CUDA
/// runtime finds libcuda at run time: nothing links it). not_supported, with `why`, when there is
/// no driver or it lacks a symbol.
errc resolve_cuda_driver_api(cuda_driver_api& api, std::string& why) noexcept;

/// The first required member of `api` that is null, or nullptr when the table is complete.
const char* missing_cuda_driver_entry(const cuda_driver_api& api) noexcept;

}  // namespace phasealloc::detail
