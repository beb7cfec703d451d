// Driver API: the virtual-memory set (cuMem*) that PyTorch's expandable segments and
// phasealloc's cuda_vmm device use, memory info, address ranges and pointer attributes.
#include <unistd.h>

#include <cstring>

#include "driver.hpp"

using namespace simcuda;
using namespace simcuda::drv;

namespace {
constexpr std::size_t granularity_bytes = std::size_t{2} << 20;

/// A host location of cuMemCreate (CUDA 12.2+): host memory, or one NUMA node's (node 0, the only
/// one simulated), or the calling thread's node. Under host_vmm:0 (a driver before 12.2) none is.
bool host_location(const CUmemLocation& location) {
  if (!current_config().host_vmm) return false;
  switch (location.type) {
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      return true;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      return location.id == 0;
    default:
      return false;
  }
}
}  // namespace

extern "C" {

CUresult cuMemGetInfo(size_t* free, size_t* total) {  // _v2
  CUdevice device = 0;
  cuCtxGetDevice(&device);
  const std::size_t capacity = current_config().gpu.memory_bytes;
  const std::size_t used = mapped_bytes(device);
  if (free) *free = capacity - std::min(capacity, used);
  if (total) *total = capacity;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags) {
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!host_location(prop->location) && (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(prop->location.id)))
    return CUDA_ERROR_INVALID_DEVICE;
  *granularity = granularity_bytes;  // minimum and recommended alike, as on current GPUs
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  if (handle == nullptr || prop == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return not_supported("cuMemCreate", "only pinned allocations");
  const auto types = static_cast<unsigned>(prop->requestedHandleTypes);
  if (host_location(prop->location)) {  // host memory that maps at device addresses (offload)
    if (types != 0) return not_supported("cuMemCreate", "host-located handles are not shareable here");
    if (bytes == 0 || bytes % granularity_bytes != 0) return CUDA_ERROR_INVALID_VALUE;
    std::uint64_t id = 0;
    if (const mem_status s = vmm_create_host(bytes, &id); s != mem_status::ok) return from(s);
    *handle = id;
    return CUDA_SUCCESS;
  }
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return not_supported("cuMemCreate", "only device and host locations");
  if (!valid_device(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  if (types & static_cast<unsigned>(CU_MEM_HANDLE_TYPE_FABRIC))  // probed by PyTorch and NCCL, who fall back
    return not_supported("cuMemCreate", "fabric handles (multi-node NVLink) are not emulated: only POSIX file "
                                        "descriptor handles are shareable");
  if (types & ~static_cast<unsigned>(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    return not_supported("cuMemCreate", "only POSIX file descriptor handles are shareable");
  if (bytes == 0 || bytes % granularity_bytes != 0) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t id = 0;
  mem_status s = vmm_create(prop->location.id, bytes, types != 0, &id);
  if (s != mem_status::ok) return from(s);
  *handle = id;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  return vmm_release(handle) == mem_status::ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemAddressReserve(CUdeviceptr* pointer, size_t bytes, size_t alignment, CUdeviceptr hint,
                             unsigned long long flags) {
  if (pointer == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  void* out = nullptr;
  mem_status s = vmm_reserve(bytes, alignment, reinterpret_cast<void*>(hint), &out);
  if (s != mem_status::ok) return from(s);
  *pointer = reinterpret_cast<CUdeviceptr>(out);
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr pointer, size_t bytes) {
  return from(vmm_address_free(reinterpret_cast<void*>(pointer), bytes));
}

CUresult cuMemMap(CUdeviceptr pointer, size_t bytes, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return from(vmm_map(reinterpret_cast<void*>(pointer), bytes, offset, handle));
}

CUresult cuMemUnmap(CUdeviceptr pointer, size_t bytes) {
  return from(vmm_unmap(reinterpret_cast<void*>(pointer), bytes));
}

CUresult cuMemSetAccess(CUdeviceptr pointer, size_t bytes, const CUmemAccessDesc* descriptors, size_t count) {
  if (descriptors == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  bool read_write = false;
  for (size_t i = 0; i < count; ++i) {
    const CUmemAccessDesc& d = descriptors[i];
    if (d.location.type != CU_MEM_LOCATION_TYPE_DEVICE || !valid_device(d.location.id)) return CUDA_ERROR_INVALID_DEVICE;
    if (d.flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) read_write = true;
    else if (d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE)
      return not_supported("cuMemSetAccess", "only read-write or no access");
  }
  if (!read_write) return not_supported("cuMemSetAccess", "revoking access is not simulated");
  return from(vmm_set_access(reinterpret_cast<void*>(pointer), bytes));
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* address) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t id = 0;
  if (!vmm_handle_at(address, &id)) return CUDA_ERROR_INVALID_VALUE;
  *handle = id;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (!vmm_handle_info(handle, &device, nullptr)) return CUDA_ERROR_INVALID_VALUE;
  std::memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  const bool host = vmm_handle_host_located(handle);
  prop->location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = host ? 0 : device;
  int fd = -1;
  if (vmm_export_fd(handle, &fd) == mem_status::ok) {
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    close(fd);
  }
  return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type, unsigned long long flags) {
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return not_supported("cuMemExportToShareableHandle", "only POSIX file descriptors");
  int fd = -1;
  mem_status s = vmm_export_fd(handle, &fd);
  if (s != mem_status::ok) return CUDA_ERROR_INVALID_VALUE;
  *static_cast<int*>(shareable) = fd;
  return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* shareable,
                                        CUmemAllocationHandleType type) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return not_supported("cuMemImportFromShareableHandle", "only POSIX file descriptors");
  // The fd travels in the pointer's value (CUDA's convention for POSIX handles).
  const int fd = static_cast<int>(reinterpret_cast<std::uintptr_t>(shareable));
  std::uint64_t id = 0;
  mem_status s = vmm_import_fd(fd, &id);
  if (s != mem_status::ok) return CUDA_ERROR_INVALID_VALUE;
  *handle = id;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange(CUdeviceptr* base, size_t* bytes, CUdeviceptr pointer) {  // _v2
  pointer_info info = find_pointer(reinterpret_cast<void*>(pointer));
  if (info.kind != pointer_kind::device) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = reinterpret_cast<CUdeviceptr>(info.base);
  if (bytes) *bytes = info.bytes;
  return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr pointer) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  pointer_info info = find_pointer(reinterpret_cast<void*>(pointer));
  const bool device = info.kind == pointer_kind::device;
  const bool host = info.kind == pointer_kind::host_pinned || info.kind == pointer_kind::host_registered;
  if (!device && !host) return CUDA_ERROR_INVALID_VALUE;  // memory CUDA does not know
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = primary_context(device ? info.device : current_device());
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *static_cast<void**>(data) = reinterpret_cast<void*>(pointer);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = device ? info.device : current_device();
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = reinterpret_cast<CUdeviceptr>(info.base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = info.bytes;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = 1;
      return CUDA_SUCCESS;
    default:
      return not_supported("cuPointerGetAttribute", "this pointer attribute is not modelled");
  }
}

}  // extern "C"
