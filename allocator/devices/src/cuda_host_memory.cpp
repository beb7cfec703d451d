#include "phasealloc/devices/cuda_host_memory.hpp"

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "cuda_runtime_util.hpp"

namespace phasealloc {

result<void*> cuda_host_memory::allocate(std::size_t bytes) noexcept {
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (e == cudaSuccess) return p;
  (void)cudaGetLastError();
  std::lock_guard lock(mutex_);
  last_failure_ = fmt::format("cudaHostAlloc({}) failed: {}", bytes, detail::describe_cuda_error(e));
  return e == cudaErrorMemoryAllocation ? errc::out_of_memory : errc::device_refused;
}

errc cuda_host_memory::free(void* ptr, std::size_t /*bytes*/) noexcept {
  const cudaError_t e = cudaFreeHost(ptr);
  if (e == cudaSuccess) return errc::ok;
  (void)cudaGetLastError();
  std::lock_guard lock(mutex_);
  last_failure_ = fmt::format("cudaFreeHost({}) failed: {}", ptr, detail::describe_cuda_error(e));
  return errc::device_refused;
}

std::string cuda_host_memory::last_failure() const {
  std::lock_guard lock(mutex_);
  return last_failure_;
}

}  // namespace phasealloc
