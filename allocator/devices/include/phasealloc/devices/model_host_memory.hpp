// model_host_memory: host_memory from the C++ heap (4 KiB aligned), for tests, benches and the model
// device's process. The bytes are real, so callers may read and write them; they are not
// page-locked. A capacity models the host's limit on locked memory, and fault injection fails the
// next allocate() like a cudaHostAlloc would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "phasealloc/host_memory.hpp"

namespace phasealloc {

struct model_host_counters {
  std::uint64_t allocate = 0;
  std::uint64_t free = 0;
  std::uint64_t failed = 0;
};

class model_host_memory final : public host_memory {
 public:
  explicit model_host_memory(std::size_t capacity_bytes = SIZE_MAX) noexcept : capacity_bytes_(capacity_bytes) {}
  ~model_host_memory() override;  ///< Frees what callers leaked.

  std::string_view name() const noexcept override { return "model_host"; }
  result<void*> allocate(std::size_t bytes) noexcept override;
  /// invalid_argument for a pointer it did not hand out or a size that differs.
  errc free(void* ptr, std::size_t bytes) noexcept override;
  std::string last_failure() const override;

  /// The next allocate() fails with `code` (out_of_memory or device_refused).
  void fail_next_allocate(errc code) noexcept;
  std::size_t allocated_bytes() const noexcept;
  model_host_counters counters() const noexcept;

 private:
  mutable std::mutex mutex_;
  std::size_t capacity_bytes_;
  std::size_t allocated_bytes_ = 0;
  std::unordered_map<void*, std::size_t> live_;
  errc next_failure_ = errc::ok;
  std::string last_failure_;
  model_host_counters counters_;
};

}  // namespace phasealloc
