// Driver API: page-locked host memory (cuMemHostAlloc, cuMemAllocHost, cuMemFreeHost), the
// driver's side of the runtime's cudaHostAlloc / cudaFreeHost: the same books (core.hpp's
// host_alloc), so a pointer made by either is freed by either, and its device address under
// unified addressing is the host address.
#include "driver.hpp"

using namespace simcuda;
using namespace simcuda::drv;

extern "C" {

CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
  if (pointer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  if (const graph_status g = check_unsafe_call(); g != graph_status::ok) return from(g);
  return from(host_alloc(bytes, pointer));
}

CUresult cuMemAllocHost(void** pointer, size_t bytes) { return cuMemHostAlloc(pointer, bytes, 0); }  // _v2

CUresult cuMemFreeHost(void* pointer) {
  if (const graph_status g = check_unsafe_call(); g != graph_status::ok) return from(g);
  return host_free(pointer) == mem_status::ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // extern "C"
