#include "phasealloc/devices/model_host_memory.hpp"

#include <cstdlib>
#include <new>

#include <fmt/format.h>

namespace phasealloc {
namespace {
constexpr std::size_t alignment_bytes = 4096;
}

model_host_memory::~model_host_memory() {
  for (auto& [ptr, bytes] : live_) std::free(ptr);
}

result<void*> model_host_memory::allocate(std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  ++counters_.allocate;
  const auto fail = [&](errc code, std::string why) -> result<void*> {
    ++counters_.failed;
    last_failure_ = std::move(why);
    return code;
  };
  if (next_failure_ != errc::ok) {
    const errc code = next_failure_;
    next_failure_ = errc::ok;
    return fail(code, fmt::format("model_host allocate({}) failed: injected {}", bytes, to_string(code)));
  }
  if (bytes == 0 || bytes % alignment_bytes != 0) {
    return fail(errc::invalid_argument, fmt::format("model_host allocate({}): not a positive multiple of 4096", bytes));
  }
  if (bytes > capacity_bytes_ - allocated_bytes_) {
    return fail(errc::out_of_memory, fmt::format("model_host allocate({}): {} of {} bytes locked", bytes,
                                                 allocated_bytes_, capacity_bytes_));
  }
  void* p = std::aligned_alloc(alignment_bytes, bytes);
  if (p == nullptr) {
    return fail(errc::out_of_memory, fmt::format("model_host allocate({}): the heap is out of memory", bytes));
  }
  live_.emplace(p, bytes);
  allocated_bytes_ += bytes;
  return p;
}

errc model_host_memory::free(void* ptr, std::size_t bytes) noexcept {
  std::lock_guard lock(mutex_);
  ++counters_.free;
  const auto it = live_.find(ptr);
  if (it == live_.end() || it->second != bytes) {
    ++counters_.failed;
    last_failure_ = fmt::format("model_host free({}, {}): not a live allocation of that size", ptr, bytes);
    return errc::invalid_argument;
  }
  std::free(ptr);
  allocated_bytes_ -= bytes;
  live_.erase(it);
  return errc::ok;
}

std::string model_host_memory::last_failure() const {
  std::lock_guard lock(mutex_);
  return last_failure_;
}

void model_host_memory::fail_next_allocate(errc code) noexcept {
  std::lock_guard lock(mutex_);
  next_failure_ = code;
}

std::size_t model_host_memory::allocated_bytes() const noexcept {
  std::lock_guard lock(mutex_);
  return allocated_bytes_;
}

model_host_counters model_host_memory::counters() const noexcept {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace phasealloc
