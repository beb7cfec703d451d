#include "usage_reports.hpp"

#include <c10/core/Allocator.h>

#include "books.hpp"

namespace phasealloc::c10_bridge {

void note_for_profiler(const phasealloc_event& event) noexcept {
  if ((event.action == PHASEALLOC_EVENT_ALLOC || event.action == PHASEALLOC_EVENT_FREE_REQUESTED) &&
      c10::memoryProfilingEnabled()) [[unlikely]] {
    const auto bytes = static_cast<std::int64_t>(event.size);
    t_profiled = {true, reinterpret_cast<void*>(event.addr), event.action == PHASEALLOC_EVENT_ALLOC ? bytes : -bytes,
                  event.device};
  }
}

void report_to_profiler() {
  const profiled_event e = t_profiled;
  t_profiled.pending = false;
  const auto device = static_cast<c10::DeviceIndex>(e.device);
  const auto stats = engine_stats(device);
  c10::reportMemoryUsageToProfiler(e.ptr, e.bytes, static_cast<std::size_t>(stats.allocated_bytes[0].current),
                                   static_cast<std::size_t>(stats.reserved_bytes[0].current),
                                   c10::Device(c10::DeviceType::CUDA, device));
}

}  // namespace phasealloc::c10_bridge
