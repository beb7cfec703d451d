// Runtime API: copies and memsets. They are real: device memory is host memory in a device
// arena, so a copy is a memcpy after both ranges are checked (a bad range is an error value,
// never a fault inside the simulator); at values:off a device-to-device copy moves nothing
// (copy_moves_bytes). Async variants run at the call, in stream order; on a
// capturing stream they become graph nodes (checked now, run at each launch of the graph).
// Synchronous ones are potentially unsafe calls during a capture (check_unsafe_call).
#include <cstring>

#include "runtime.hpp"

using namespace simcuda;
using namespace simcuda::rt;

namespace {


cudaError_t check_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  bool dst_device = false, src_device = false, dst_host = false, src_host = false;
  switch (kind) {
    case cudaMemcpyHostToHost: dst_host = src_host = true; break;
    case cudaMemcpyHostToDevice: dst_device = src_host = true; break;
    case cudaMemcpyDeviceToHost: dst_host = src_device = true; break;
    case cudaMemcpyDeviceToDevice: dst_device = src_device = true; break;
    case cudaMemcpyDefault: break;
    default: return result(cudaErrorInvalidMemcpyDirection);
  }
  if (!copy_side_ok(dst, bytes, dst_device, dst_host) || !copy_side_ok(src, bytes, src_device, src_host))
    return result(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  cudaError_t e = check_copy(dst, src, bytes, kind);
  if (e != cudaSuccess) return e;
  if (copy_moves_bytes(dst, src)) std::memmove(dst, src, bytes);
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

/// A copy of `height` rows queued on a stream: recorded when the stream captures, else run.
cudaError_t copy_on(cudaStream_t handle, void* dst, std::size_t dpitch, const void* src, std::size_t spitch,
                    std::size_t width, std::size_t height, cudaMemcpyKind kind) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (width == 0 || height == 0) return cudaSuccess;
  for (std::size_t row = 0; row < height; ++row) {
    cudaError_t e = check_copy(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch,
                               width, kind);
    if (e != cudaSuccess) return e;
  }
  node_work work;
  work.kind = node_kind::memcpy;
  work.dst = dst;
  work.src = src;
  work.width = width;
  work.height = height;
  work.dst_pitch = dpitch;
  work.src_pitch = spitch;
  bool captured = false;
  cudaError_t e = enqueue(s, handle, work, &captured);
  if (e != cudaSuccess || captured) return e;
  const bool moves = copy_moves_bytes(dst, src);
  for (std::size_t row = 0; row < height; ++row) {
    if (moves)
      std::memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch, width);
    count_memcpy(width);
    tick();
  }
  return cudaSuccess;
}

cudaError_t set_on(cudaStream_t handle, void* dst, int value, std::size_t bytes) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!device_range_accessible(dst, bytes)) return result(cudaErrorInvalidValue);
  node_work work;
  work.kind = node_kind::memset;
  work.dst = dst;
  work.width = bytes;
  work.dst_pitch = bytes;
  work.value = static_cast<std::uint8_t>(value);
  bool captured = false;
  cudaError_t e = enqueue(s, handle, work, &captured);
  if (e != cudaSuccess || captured) return e;
  return set(dst, value, bytes);
}

/// A synchronous copy or memset runs on the legacy stream and waits for it: a potentially unsafe
/// call while capturing, and an implicit dependency on a capturing blocking stream.
cudaError_t check_synchronous() {
  cudaError_t e = result(from(check_unsafe_call()));
  if (e != cudaSuccess) return e;
  return result(from(check_legacy_use(current_device())));
}

}  // namespace

extern "C" {

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t e = check_synchronous(); e != cudaSuccess) return e;
  synchronize_device(current_device());  // a synchronous copy waits for the device
  return copy(dst, src, bytes, kind);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return copy_on(stream, dst, bytes, src, bytes, bytes, 1, kind);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                                cudaStream_t stream) {
  if (!valid_device(dst_device) || !valid_device(src_device)) return result(cudaErrorInvalidDevice);
  return copy_on(stream, dst, bytes, src, bytes, bytes, 1, cudaMemcpyDeviceToDevice);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  if (stream_of(stream) == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (width > dpitch || width > spitch) return result(cudaErrorInvalidPitchValue);
  return copy_on(stream, dst, dpitch, src, spitch, width, height, kind);
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (cudaError_t e = check_synchronous(); e != cudaSuccess) return e;
  synchronize_device(current_device());
  return set(dst, value, bytes);
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  return set_on(stream, dst, value, bytes);
}

}  // extern "C"
