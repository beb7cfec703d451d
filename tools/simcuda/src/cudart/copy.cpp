// Runtime API: copies and memsets. They are real: device memory is host memory in a device
// arena, so a copy is a memcpy after both ranges are checked (a bad range is an error value,
// never a fault inside the simulator). Async variants run at the call, in stream order.
#include <cstring>

#include "runtime.hpp"

using namespace simcuda;
using namespace simcuda::rt;

namespace {

/// A side of a copy is valid if it is accessible device memory, or anything outside the device
/// arenas (host memory: pageable or pinned, which the caller vouches for as CUDA does).
bool side_ok(const void* pointer, std::size_t bytes, bool must_be_device, bool must_be_host) {
  pointer_info info = find_pointer(pointer);
  const bool in_arena = info.kind == pointer_kind::device || info.device >= 0;
  if (must_be_device && !in_arena) return false;
  if (must_be_host && in_arena) return false;
  if (info.kind == pointer_kind::device || in_arena) return device_range_accessible(pointer, bytes);
  return pointer != nullptr;
}

cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  bool dst_device = false, src_device = false, dst_host = false, src_host = false;
  switch (kind) {
    case cudaMemcpyHostToHost: dst_host = src_host = true; break;
    case cudaMemcpyHostToDevice: dst_device = src_host = true; break;
    case cudaMemcpyDeviceToHost: dst_host = src_device = true; break;
    case cudaMemcpyDeviceToDevice: dst_device = src_device = true; break;
    case cudaMemcpyDefault: break;
    default: return result(cudaErrorInvalidMemcpyDirection);
  }
  if (!side_ok(dst, bytes, dst_device, dst_host) || !side_ok(src, bytes, src_device, src_host))
    return result(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  count_memcpy(bytes);
  tick();
  return cudaSuccess;
}

cudaError_t set(void* dst, int value, std::size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!device_range_accessible(dst, bytes)) return result(cudaErrorInvalidValue);
  device_memset(dst, value, bytes);
  count_memset();
  tick();
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  synchronize_device(current_device());  // a synchronous copy waits for the device
  return copy(dst, src, bytes, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (stream_of(stream) == nullptr) return result(cudaErrorInvalidResourceHandle);
  return copy(dst, src, bytes, kind);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream) {
  if (!valid_device(dst_device) || !valid_device(src_device)) return result(cudaErrorInvalidDevice);
  if (stream_of(stream) == nullptr) return result(cudaErrorInvalidResourceHandle);
  return copy(dst, src, bytes, cudaMemcpyDeviceToDevice);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  if (stream_of(stream) == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (width > dpitch || width > spitch) return result(cudaErrorInvalidPitchValue);
  for (size_t row = 0; row < height; ++row) {
    cudaError_t e = copy(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch,
                         width, kind);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  synchronize_device(current_device());
  return set(dst, value, bytes);
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (stream_of(stream) == nullptr) return result(cudaErrorInvalidResourceHandle);
  return set(dst, value, bytes);
}

}  // extern "C"
