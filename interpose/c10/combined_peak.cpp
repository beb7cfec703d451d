#include "combined_peak.hpp"

#include <algorithm>

#include <c10/util/Exception.h>

#include "phasealloc_c_api.h"

namespace phasealloc::c10_bridge {
namespace {

constexpr auto relaxed = std::memory_order_relaxed;

/// Raises `peak` to `sum`; `peak` has one writer at a time (the engine's lock, or the native mutex).
void raise(std::atomic<std::int64_t>& peak, std::int64_t sum) {
  if (sum > peak.load(relaxed)) peak.store(sum, relaxed);
}

}  // namespace

combined_peak::books& combined_peak::at(int device) {
  TORCH_CHECK(device >= 0 && device < max_devices, "phasealloc: device ", device, " is beyond the ", max_devices,
              " GPUs phasealloc handles");
  return books_[static_cast<std::size_t>(device)];
}

const combined_peak::books& combined_peak::at(int device) const {
  return const_cast<combined_peak*>(this)->at(device);
}

void combined_peak::on_engine_event(int device, int action, std::size_t block_bytes,
                                    std::size_t reserved_bytes) noexcept {
  if (device < 0 || device >= max_devices) return;
  books& b = books_[static_cast<std::size_t>(device)];
  // One writer per device (its engine's lock): plain loads and stores, no read-modify-write.
  switch (action) {
    case PHASEALLOC_EVENT_ALLOC: {
      sum_books& a = b.allocated;
      const std::int64_t ours = a.ours.load(relaxed) + static_cast<std::int64_t>(block_bytes);
      a.ours.store(ours, relaxed);
      raise(a.events_peak, ours + a.native.load(relaxed));
      break;
    }
    case PHASEALLOC_EVENT_FREE_REQUESTED:
      b.allocated.ours.store(b.allocated.ours.load(relaxed) - static_cast<std::int64_t>(block_bytes), relaxed);
      break;
    case PHASEALLOC_EVENT_SEGMENT_ALLOC:
    case PHASEALLOC_EVENT_SEGMENT_MAP:
    case PHASEALLOC_EVENT_SEGMENT_UNMAP:
    case PHASEALLOC_EVENT_SEGMENT_FREE: {
      // Segment events are rare: sequentially consistent, so that this store and native's (in
      // on_native_change) cannot both miss the other's new value.
      sum_books& r = b.reserved;
      const auto ours = static_cast<std::int64_t>(reserved_bytes);
      r.ours.store(ours);
      raise(r.events_peak, ours + r.native.load());
      break;
    }
    default: break;
  }
}

void combined_peak::on_native_change(int device, std::int64_t native_allocated_bytes,
                                     std::int64_t native_reserved_bytes) {
  books& b = at(device);
  std::lock_guard lock(native_mutex_);
  b.allocated.native.store(native_allocated_bytes, relaxed);
  raise(b.allocated.native_peak, b.allocated.ours.load(relaxed) + native_allocated_bytes);
  b.reserved.native.store(native_reserved_bytes);
  raise(b.reserved.native_peak, b.reserved.ours.load() + native_reserved_bytes);
}

void combined_peak::sum_books::reset() {
  const std::int64_t sum = ours.load() + native.load();
  events_peak.store(sum, relaxed);
  native_peak.store(sum, relaxed);
}

std::int64_t combined_peak::sum_books::peak() const {
  return std::max(events_peak.load(relaxed), native_peak.load(relaxed));
}

void combined_peak::reset(int device) {
  books& b = at(device);
  std::lock_guard lock(native_mutex_);
  b.allocated.reset();
  b.reserved.reset();
}

std::int64_t combined_peak::allocated_peak(int device) const { return at(device).allocated.peak(); }

std::int64_t combined_peak::reserved_peak(int device) const { return at(device).reserved.peak(); }

}  // namespace phasealloc::c10_bridge
