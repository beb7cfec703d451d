#include "combined_peak.hpp"

#include <algorithm>

#include <c10/util/Exception.h>

#include "phasealloc_c_api.h"

namespace phasealloc::c10_bridge {

combined_peak::books& combined_peak::at(int device) {
  TORCH_CHECK(device >= 0 && device < max_devices, "phasealloc: device ", device, " is beyond the ", max_devices,
              " GPUs phasealloc handles");
  return books_[static_cast<std::size_t>(device)];
}

const combined_peak::books& combined_peak::at(int device) const {
  return const_cast<combined_peak*>(this)->at(device);
}

void combined_peak::on_block_event(int device, int action, std::size_t block_bytes) noexcept {
  if (device < 0 || device >= max_devices) return;
  books& b = books_[static_cast<std::size_t>(device)];
  const auto bytes = static_cast<std::int64_t>(block_bytes);
  // One writer per device (its engine's lock): plain loads and stores, no read-modify-write.
  if (action == PHASEALLOC_EVENT_ALLOC) {
    const std::int64_t ours = b.ours.load(std::memory_order_relaxed) + bytes;
    b.ours.store(ours, std::memory_order_relaxed);
    const std::int64_t sum = ours + b.native.load(std::memory_order_relaxed);
    if (sum > b.events_peak.load(std::memory_order_relaxed)) b.events_peak.store(sum, std::memory_order_relaxed);
  } else if (action == PHASEALLOC_EVENT_FREE_REQUESTED) {
    b.ours.store(b.ours.load(std::memory_order_relaxed) - bytes, std::memory_order_relaxed);
  }
}

void combined_peak::on_native_change(int device, std::int64_t native_allocated_bytes) {
  books& b = at(device);
  std::lock_guard lock(native_mutex_);
  b.native.store(native_allocated_bytes, std::memory_order_relaxed);
  const std::int64_t sum = b.ours.load(std::memory_order_relaxed) + native_allocated_bytes;
  if (sum > b.native_peak.load(std::memory_order_relaxed)) b.native_peak.store(sum, std::memory_order_relaxed);
}

void combined_peak::reset(int device) {
  books& b = at(device);
  std::lock_guard lock(native_mutex_);
  const std::int64_t sum = b.ours.load(std::memory_order_relaxed) + b.native.load(std::memory_order_relaxed);
  b.events_peak.store(sum, std::memory_order_relaxed);
  b.native_peak.store(sum, std::memory_order_relaxed);
}

std::int64_t combined_peak::peak(int device) const {
  const books& b = at(device);
  return std::max(b.events_peak.load(std::memory_order_relaxed), b.native_peak.load(std::memory_order_relaxed));
}

}  // namespace phasealloc::c10_bridge
