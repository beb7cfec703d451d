// The host memory contract: where the host buffer pool's page-locked bytes come from.
//
//   allocate(bytes) -> ptr   page-locked host memory (cudaHostAlloc), dereferenceable by the caller.
//   free(ptr, bytes)         gives it back (cudaFreeHost); ptr and bytes exactly as allocated.
//
// Both are noexcept and return errors as values: out_of_memory when the host cannot lock that
// much, device_refused for any other driver failure (last_failure() has the driver's words).
// The pool is the only caller and serialises its calls under its own lock.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "phasealloc/status.hpp"

namespace phasealloc {

class host_memory {
 public:
  virtual ~host_memory() = default;
  /// A short name for reports: "model_host", "cuda_host".
  virtual std::string_view name() const noexcept = 0;
  virtual result<void*> allocate(std::size_t bytes) noexcept = 0;
  virtual errc free(void* ptr, std::size_t bytes) noexcept = 0;
  virtual std::string last_failure() const { return {}; }
};

}  // namespace phasealloc
