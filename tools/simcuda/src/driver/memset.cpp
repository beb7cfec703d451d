// Driver API: memsets and stream memory writes. Real, like the runtime's: device memory is host
// memory, checked first so a bad range is an error value. On a capturing stream they become
// memset nodes (a 32-bit write is a one-element memset), run at each launch of the graph.
#include <cstring>

#include "driver.hpp"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

/// `count` elements of `element_size` bytes set to `value` on a stream, or recorded. `memset`:
/// counted as a memset when it runs (a stream write is not).
CUresult set_on(CUstream handle, void* p, std::uint32_t value, unsigned element_size, size_t count, bool memset) {
  stream* s = resolve_stream(handle);
  node_work work;
  work.kind = node_kind::memset;
  work.dst = p;
  work.width = count;
  work.dst_pitch = count * element_size;
  work.value = value;
  work.element_size = element_size;
  bool captured = false;
  CUresult r = enqueue(s, handle, work, &captured);
  if (r != CUDA_SUCCESS || captured) return r;
  if (element_size == 1 || value == 0) {
    device_memset(p, static_cast<int>(value), count * element_size);
  } else {
    auto* words = static_cast<std::uint32_t*>(p);
    for (size_t i = 0; i < count; ++i) words[i] = value;
  }
  if (memset) count_memset();
  tick();
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

CUresult cuMemsetD8Async(CUdeviceptr destination, unsigned char value, size_t count, CUstream handle) {
  if (resolve_stream(handle) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (count == 0) return CUDA_SUCCESS;
  auto* p = reinterpret_cast<unsigned char*>(destination);
  if (!device_range_accessible(p, count)) return CUDA_ERROR_INVALID_VALUE;
  return set_on(handle, p, value, 1, count, true);
}

CUresult cuMemsetD32Async(CUdeviceptr destination, unsigned int value, size_t count, CUstream handle) {
  if (resolve_stream(handle) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (destination % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
  if (count == 0) return CUDA_SUCCESS;
  auto* p = reinterpret_cast<unsigned int*>(destination);
  if (count > (SIZE_MAX / 4) || !device_range_accessible(p, count * 4)) return CUDA_ERROR_INVALID_VALUE;
  return set_on(handle, p, value, 4, count, true);
}

CUresult cuStreamWriteValue32(CUstream handle, CUdeviceptr address, cuuint32_t value, unsigned int flags) {  // _v2
  if (resolve_stream(handle) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~static_cast<unsigned>(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)) return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<cuuint32_t*>(address);
  if (address % 4 != 0 || !device_range_accessible(p, 4)) return CUDA_ERROR_INVALID_VALUE;
  return set_on(handle, p, value, 4, 1, false);
}

}  // extern "C"
