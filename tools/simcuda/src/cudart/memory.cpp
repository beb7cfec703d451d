// Runtime API: device and host allocations, pointer attributes, IPC handles. Allocating and
// freeing are potentially unsafe calls during a stream capture (check_unsafe_call: PyTorch's
// allocator switches its thread to relaxed mode around cudaMalloc); stream-ordered allocation
// on a capturing stream would be a memory node, which is not simulated.
#include <unistd.h>

#include <cstring>

#include "runtime.hpp"

using namespace simcuda;
using namespace simcuda::rt;

namespace {

cudaError_t refuse_memory_node(stream* s, const char* function) {
  if (refuse_in_capture(s) == graph_status::ok) return cudaSuccess;
  return result(static_cast<cudaError_t>(unsupported(
      library, function, "stream-ordered allocation in a stream capture (a memory node) is not simulated; capture invalidated",
      cudaErrorStreamCaptureUnsupported)));
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return result(cudaErrorInvalidValue);
  if (cudaError_t e = result(from(check_unsafe_call())); e != cudaSuccess) return e;
  return result(from(device_malloc(current_device(), bytes, pointer)));
}

cudaError_t cudaFree(void* pointer) {
  // cudaFree synchronizes the device before it frees.
  if (cudaError_t e = result(from(check_unsafe_call())); e != cudaSuccess) return e;
  synchronize_device(current_device());
  mem_status s = device_free(pointer);
  if (s == mem_status::invalid_pointer) return result(cudaErrorInvalidValue);
  return result(from(s));
}

cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t stream) {
  simcuda::stream* s = stream_of(stream);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = refuse_memory_node(s, "cudaMallocAsync"); e != cudaSuccess) return e;
  tick();
  return cudaMalloc(pointer, bytes);
}

cudaError_t cudaFreeAsync(void* pointer, cudaStream_t stream) {
  simcuda::stream* on = stream_of(stream);
  if (on == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (cudaError_t e = refuse_memory_node(on, "cudaFreeAsync"); e != cudaSuccess) return e;
  tick();
  mem_status s = device_free(pointer);
  return result(s == mem_status::invalid_pointer ? cudaErrorInvalidValue : from(s));
}

cudaError_t cudaHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  if (pointer == nullptr) return result(cudaErrorInvalidValue);
  const unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
  if (flags & ~known) return result(cudaErrorInvalidValue);
  if (cudaError_t e = result(from(check_unsafe_call())); e != cudaSuccess) return e;
  return result(from(host_alloc(bytes, pointer)));
}

cudaError_t cudaMallocHost(void** pointer, size_t bytes) { return cudaHostAlloc(pointer, bytes, 0); }

cudaError_t cudaFreeHost(void* pointer) {
  if (cudaError_t e = result(from(check_unsafe_call())); e != cudaSuccess) return e;
  mem_status s = host_free(pointer);
  return result(s == mem_status::ok ? cudaSuccess : cudaErrorInvalidValue);
}

cudaError_t cudaHostRegister(void* pointer, size_t bytes, unsigned int flags) {
  const unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
                         cudaHostRegisterReadOnly;
  if (flags & ~known) return result(cudaErrorInvalidValue);
  if (flags & cudaHostRegisterIoMemory) return not_supported("cudaHostRegister", "cudaHostRegisterIoMemory");
  mem_status s = host_register(pointer, bytes);
  if (s == mem_status::in_use) return result(cudaErrorHostMemoryAlreadyRegistered);
  return result(from(s));
}

cudaError_t cudaHostUnregister(void* pointer) {
  mem_status s = host_unregister(pointer);
  return result(s == mem_status::ok ? cudaSuccess : cudaErrorHostMemoryNotRegistered);
}

// Mapped pinned memory under unified addressing (every 64-bit CUDA 13 platform): the device
// address of pinned or registered host memory is the host address itself, as
// cudaPointerGetAttributes reports it. vLLM reads pinned CPU tensors from kernels this way.
cudaError_t cudaHostGetDevicePointer(void** device_pointer, void* host_pointer, unsigned int flags) {
  if (device_pointer == nullptr || flags != 0) return result(cudaErrorInvalidValue);
  pointer_info info = find_pointer(host_pointer);
  if (info.kind != pointer_kind::host_pinned && info.kind != pointer_kind::host_registered)
    return result(cudaErrorInvalidValue);
  *device_pointer = host_pointer;
  return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* pointer) {
  if (attributes == nullptr) return result(cudaErrorInvalidValue);
  std::memset(attributes, 0, sizeof *attributes);
  pointer_info info = find_pointer(pointer);
  switch (info.kind) {
    case pointer_kind::device:
      attributes->type = cudaMemoryTypeDevice;
      attributes->device = info.device;
      attributes->devicePointer = const_cast<void*>(pointer);
      attributes->hostPointer = nullptr;
      break;
    case pointer_kind::host_pinned:
    case pointer_kind::host_registered:
      attributes->type = cudaMemoryTypeHost;
      attributes->device = current_device();
      attributes->devicePointer = const_cast<void*>(pointer);  // mapped: same address
      attributes->hostPointer = const_cast<void*>(pointer);
      break;
    case pointer_kind::unknown:
      attributes->type = cudaMemoryTypeUnregistered;
      attributes->device = -2;
      break;
  }
  return cudaSuccess;
}

cudaError_t cudaMallocManaged(void**, size_t, unsigned int) {
  return not_supported("cudaMallocManaged", "managed (unified) memory is not simulated");
}

// Not imported by torch; bitsandbytes' CUDA 13 library links it (its paged optimizers prefetch
// managed memory), so the library cannot load without it.
cudaError_t cudaMemPrefetchAsync(const void*, size_t, cudaMemLocation, unsigned int, cudaStream_t) {
  return not_supported("cudaMemPrefetchAsync", "managed (unified) memory is not simulated: there is none to prefetch");
}

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* pointer) {
  if (handle == nullptr) return result(cudaErrorInvalidValue);
  ipc_descriptor d;
  mem_status s = ipc_export(pointer, &d);
  if (s != mem_status::ok) return result(cudaErrorInvalidValue);
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, &d, sizeof d);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void** pointer, cudaIpcMemHandle_t handle, unsigned int) {
  if (pointer == nullptr) return result(cudaErrorInvalidValue);
  ipc_descriptor d;
  std::memcpy(&d, handle.reserved, sizeof d);
  if (d.pid == static_cast<std::int32_t>(getpid())) return result(cudaErrorDeviceUninitialized);  // as CUDA
  mem_status s = ipc_open(d, pointer);
  if (s == mem_status::invalid_value) return result(cudaErrorInvalidResourceHandle);
  return result(from(s));
}

cudaError_t cudaIpcCloseMemHandle(void* pointer) {
  return result(ipc_close(pointer) == mem_status::ok ? cudaSuccess : cudaErrorInvalidValue);
}

}  // extern "C"
