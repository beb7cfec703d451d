// Driver API: memsets and stream memory writes. Real, like the runtime's: device memory is host
// memory, checked first so a bad range is an error value.
#include <cstring>

#include "driver.hpp"

using namespace simcuda;
using namespace simcuda::drv;

extern "C" {

CUresult cuMemsetD8Async(CUdeviceptr destination, unsigned char value, size_t count, CUstream handle) {
  if (resolve_stream(handle) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (count == 0) return CUDA_SUCCESS;
  auto* p = reinterpret_cast<unsigned char*>(destination);
  if (!device_range_accessible(p, count)) return CUDA_ERROR_INVALID_VALUE;
  device_memset(p, value, count);
  count_memset();
  tick();
  return CUDA_SUCCESS;
}

CUresult cuMemsetD32Async(CUdeviceptr destination, unsigned int value, size_t count, CUstream handle) {
  if (resolve_stream(handle) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (destination % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
  if (count == 0) return CUDA_SUCCESS;
  auto* p = reinterpret_cast<unsigned int*>(destination);
  if (count > (SIZE_MAX / 4) || !device_range_accessible(p, count * 4)) return CUDA_ERROR_INVALID_VALUE;
  if (value == 0) device_memset(p, 0, count * 4);
  else for (size_t i = 0; i < count; ++i) p[i] = value;
  count_memset();
  tick();
  return CUDA_SUCCESS;
}

CUresult cuStreamWriteValue32(CUstream handle, CUdeviceptr address, cuuint32_t value, unsigned int flags) {  // _v2
  if (resolve_stream(handle) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~static_cast<unsigned>(CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)) return CUDA_ERROR_INVALID_VALUE;
  auto* p = reinterpret_cast<cuuint32_t*>(address);
  if (address % 4 != 0 || !device_range_accessible(p, 4)) return CUDA_ERROR_INVALID_VALUE;
  *p = value;
  tick();
  return CUDA_SUCCESS;
}

}  // extern "C"
