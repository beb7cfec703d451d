// What PyTorch's allocator reports about each allocation and free, reported for phasealloc's.
//
// Design note
// Rationale: torch.profiler(profile_memory=True) builds its memory timeline from the allocator's
//   reports (c10::reportMemoryUsageToProfiler), and GPU tracing (torch.cuda._sanitizer, the
//   _gpu_trace callbacks) from its allocation and free hooks. Without them a phasealloc job's
//   profile and sanitizer see nothing of most of its memory.
// Approach: GPU tracing is called inline around the engine's allocations and frees (one static
//   load when no tracer is active). For the profiler, the engine's event (on the calling thread,
//   under the engine's lock, where phasealloc must not be called back) notes the block in a
//   thread-local; the bridge reports it once its call into phasealloc has returned, with the
//   engine's books read then.
// Limitations: the profiler sees the engine's allocated and reserved totals, not native's pools.
#pragma once

#include <cstdint>

#include <c10/core/impl/GPUTrace.h>

#include "phasealloc_c_api.h"

namespace phasealloc::c10_bridge {

/// The block event of this thread waiting to be reported to the profiler.
struct profiled_event {
  bool pending = false;
  void* ptr = nullptr;
  std::int64_t bytes = 0;  ///< Negative for a free.
  int device = 0;
};
inline thread_local profiled_event t_profiled;

/// From the engine's event listener: notes an alloc or free for the profiler when it records memory.
void note_for_profiler(const phasealloc_event& event) noexcept;

/// Reports the noted event to the profiler; call when t_profiled.pending, after phasealloc returned.
[[gnu::cold, gnu::noinline]] void report_to_profiler();

/// GPU tracing of an allocation and of a free, when a tracer is active.
inline void trace_allocation(void* ptr) {
  if (const c10::impl::PyInterpreter* interp = c10::impl::GPUTrace::get_trace()) [[unlikely]] {
    (*interp)->trace_gpu_memory_allocation(c10::kCUDA, reinterpret_cast<uintptr_t>(ptr));
  }
}
inline void trace_deallocation(void* ptr) {
  if (const c10::impl::PyInterpreter* interp = c10::impl::GPUTrace::get_trace()) [[unlikely]] {
    (*interp)->trace_gpu_memory_deallocation(c10::kCUDA, reinterpret_cast<uintptr_t>(ptr));
  }
}

}  // namespace phasealloc::c10_bridge
