// Driver API: the asynchronous copy between two unified addresses (cuMemcpyAsync), as phasealloc's
// cuda_vmm device uses it to move offloaded bytes between device pages and host-located pages.
// Real, like the runtime's copies: both ranges are checked first (a bad range is an error value),
// then the bytes move at the call, in stream order; on a capturing stream it becomes a memcpy node.
#include <cstring>

#include "driver.hpp"

using namespace simcuda;
using namespace simcuda::drv;


extern "C" {

CUresult cuMemcpyAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes, CUstream handle) {
  stream* s = resolve_stream(handle);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (bytes == 0) return CUDA_SUCCESS;
  auto* dst = reinterpret_cast<void*>(destination);
  const auto* src = reinterpret_cast<const void*>(source);
  if (!copy_side_ok(dst, bytes, false, false) || !copy_side_ok(src, bytes, false, false)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  node_work work;
  work.kind = node_kind::memcpy;
  work.dst = dst;
  work.src = src;
  work.width = bytes;
  work.height = 1;
  work.dst_pitch = bytes;
  work.src_pitch = bytes;
  bool captured = false;
  const CUresult r = enqueue(s, handle, work, &captured);
  if (r != CUDA_SUCCESS || captured) return r;
  if (copy_moves_bytes(dst, src)) std::memmove(dst, src, bytes);
  count_memcpy(bytes);
  tick();
  return CUDA_SUCCESS;
}

}  // extern "C"
