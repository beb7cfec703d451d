// cuda_host_memory: page-locked host memory with cudaHostAlloc / cudaFreeHost (portable, so a
// buffer serves copies to any GPU of the process). This header includes no CUDA header.
#pragma once

#include <mutex>
#include <string>

#include "phasealloc/host_memory.hpp"

namespace phasealloc {

class cuda_host_memory final : public host_memory {
 public:
  std::string_view name() const noexcept override { return "cuda_host"; }
  /// out_of_memory for cudaErrorMemoryAllocation, device_refused for any other error.
  result<void*> allocate(std::size_t bytes) noexcept override;
  errc free(void* ptr, std::size_t bytes) noexcept override;
  std::string last_failure() const override;

 private:
  mutable std::mutex mutex_;
  std::string last_failure_;
};

}  // namespace phasealloc
