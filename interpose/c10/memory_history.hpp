// torch.cuda.memory._record_memory_history for the memory phasealloc holds: the trace entries
// PyTorch's snapshot carries (alloc, free_requested, free_completed, segment_alloc, segment_free,
// segment_map, segment_unmap, oom), with the caller's stack frames when asked.
//
// Design note
// Rationale: memory_viz, verl's and OpenRLHF's snapshot dumps and users' OOM handlers read the
//   history from torch.cuda.memory._snapshot(); it must hold our allocations as PyTorch's own
//   allocator would write them.
// Approach: PyTorch's recordHistory() settings are kept here. The bridge gathers the Python/C++
//   context on the calling thread before an allocation (and before a free under "all"), and parks
//   it in a thread-local while it calls into phasealloc; the engine's events arrive synchronously
//   on that thread through phasealloc_set_event_listener and are stored with it. Entries go to a
//   ring buffer of alloc_trace_max_entries per device, as PyTorch's does; contexts of live
//   blocks are kept for the snapshot's per-block frames.
//   As PyTorch's: turning recording off (or on with clear) empties the rings; every entry carries
//   the user metadata set at the time (torch.cuda.memory._set_memory_metadata) and the innermost
//   compile context ("N/A" outside one); _annotate_memory adds an "annotate" entry. A free block
//   keeps the size last requested of it, for the snapshot, as PyTorch's blocks do.
// Limitations: a free_completed that happens later on another thread carries no context (native
//   PyTorch does the same). A free block's last requested size is known only for frees made while
//   recording (PyTorch's allocator keeps it always).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/util/ApproximateClock.h>

#include "phasealloc_c_api.h"

namespace phasealloc::c10_bridge {

using c10::CachingDeviceAllocator::CreateContextFn;
using c10::CachingDeviceAllocator::RecordContext;
using c10::CachingDeviceAllocator::TraceEntry;
using context_ptr = std::shared_ptr<c10::GatheredContext>;

class memory_history {
 public:
  void configure(bool enabled, CreateContextFn recorder, std::size_t max_entries, RecordContext when,
                 bool clear, const std::vector<std::string>& skip_actions);
  bool enabled() const;

  /// Context for an allocation about to happen on this thread (nullptr when not recording one).
  context_ptr gather_for_alloc() const;
  /// Context for a free about to happen on this thread (only under RecordContext::ALL).
  context_ptr gather_for_free() const;

  /// Parks `context` for the events the current thread causes until the guard ends.
  class pending_guard {
   public:
    explicit pending_guard(context_ptr context);
    ~pending_guard();
    pending_guard(const pending_guard&) = delete;
    pending_guard& operator=(const pending_guard&) = delete;
  };

  /// An engine event (from the listener). Never throws.
  void on_event(const phasealloc_event& event) noexcept;
#if PHASEALLOC_TORCH_HAS_ANNOTATE_MEMORY
  /// An annotation of the live allocation at `addr` (_annotate_memory).
  void annotate(c10::DeviceIndex device, std::size_t addr, const std::string& metadata);
#endif
  /// The user metadata every new entry carries ("" for none).
  void set_user_metadata(const std::string& metadata);
  std::string user_metadata() const;
  /// The compile contexts (torch.compile regions) entries carry, innermost last.
  void push_compile_context(const std::string& context);
  void pop_compile_context();

  /// An out-of-memory failure: `free_bytes` the device reported, `requested_bytes` the request.
  void on_oom(c10::DeviceIndex device, std::size_t free_bytes, std::size_t requested_bytes, void* stream);

  /// The device's entries, oldest first, with times in microseconds since the epoch.
  std::vector<TraceEntry> entries(c10::DeviceIndex device) const;
  /// The context recorded when the live block at `addr` was allocated (or nullptr).
  context_ptr block_context(std::size_t addr) const;
  /// The size last requested of the freed block at `addr`, while recording (0 when not known):
  /// PyTorch's snapshot shows a free block with the requested size of its last allocation.
  std::size_t freed_requested_bytes(std::size_t addr) const;
  /// Trace trackers (attachAllocatorTraceTracker) see every entry as it is recorded.
  void attach_tracker(c10::CachingDeviceAllocator::AllocatorTraceTracker tracker);

 private:
  struct ring {
    std::vector<TraceEntry> entries;
    std::size_t next = 0;  ///< Where the next entry goes once the ring is full.
  };
  void push_locked(TraceEntry entry);
  TraceEntry make_entry_locked(TraceEntry::Action action, c10::DeviceIndex device, std::size_t addr, std::size_t size,
                               void* stream, context_ptr context) const;

  /// Whether anything is recorded or tracked: checked without the mutex, so the allocation path
  /// pays one relaxed load while history is off (the common case).
  std::atomic<bool> active_{false};
  std::atomic<bool> gathering_{false};  ///< Whether contexts are gathered (history on, frames asked).
  mutable std::mutex mutex_;
  bool enabled_ = false;
  CreateContextFn recorder_ = nullptr;
  RecordContext when_ = RecordContext::NEVER;
  std::size_t max_entries_ = 0;
  std::vector<bool> skip_;  ///< Indexed by TraceEntry::Action.
  std::unordered_map<c10::DeviceIndex, ring> rings_;
  std::unordered_map<std::size_t, context_ptr> live_contexts_;
  std::unordered_map<std::size_t, std::size_t> freed_requested_;  ///< Free block address -> last requested bytes.
  std::vector<c10::CachingDeviceAllocator::AllocatorTraceTracker> trackers_;
  std::string user_metadata_;
  std::vector<std::string> compile_contexts_;
  mutable c10::ApproximateClockToUnixTimeConverter clock_;  // makeConverter() is not const
};

}  // namespace phasealloc::c10_bridge
