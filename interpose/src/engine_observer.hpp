// The trace sink every engine of the interpose layer reports to.
//
// Design note
// Rationale: two things need to watch an engine from outside: the trace recorder (only while a
//   trace runs) and record_stream, which PyTorch calls with a pointer and a stream but no device.
//   With one engine per GPU, the pointer alone must say whose block it is, and the engine offers
//   no "is this yours?" query that stays silent (deallocate/record_stream report misuse).
// Approach: the observer is the engine's permanent sink. It keeps the address ranges the engine
//   holds memory for (segment_alloc/segment_map add, segment_free/segment_unmap remove: rare
//   events, so its mutex is cold; an offloaded block is added back after its range's
//   segment_unmap, since it stays the engine's at the same address) and forwards every event to the current recorder, if any.
//   Every event also goes to the process's event listener, if one is set (event_listener.hpp).
//   Swapping the recorder: store the pointer, then call engine::set_trace_sink(&observer) again.
//   The engine reads wanted_ops() there too, so that call also switches block events on or off;
//   setting the event listener does the same for every engine (engine_registry::refresh_sinks).
//   That call takes the engine's lock, so when it returns no on_event still uses the old
//   recorder, which may then be flushed and destroyed (see trace_control.cpp).
// Limitations: an address inside a held range may be free (a stale pointer); the engine that owns
//   the range then reports it precisely. Model devices get disjoint fake address ranges (one base
//   per ordinal, device_factory.cpp), as real GPUs of a process share one virtual address space.
#pragma once

#include <atomic>
#include <mutex>

#include "address_ranges.hpp"
#include "phasealloc/trace_sink.hpp"

namespace phasealloc::interpose {

class engine_observer final : public trace_sink {
 public:
  void on_event(const trace_record& record) noexcept override;
  /// Segment events always (holds() needs them); every op while a recorder or the process's event
  /// listener is set. Alloc and free events cost the hot path, so with neither they are not sent.
  trace_op_mask wanted_ops() const noexcept override;

  /// Whether `addr` lies in memory the engine holds (mapped segments or pages).
  bool holds(device_address addr) const;

  /// The sink events are forwarded to (nullptr: none). See the note on swapping.
  void set_forward(trace_sink* sink) noexcept { forward_.store(sink, std::memory_order_release); }
  /// The GPU ordinal named in events passed to the process's event listener (event_listener.hpp).
  void set_ordinal(int ordinal) noexcept { ordinal_ = ordinal; }
  trace_sink* forward() const noexcept { return forward_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mutex_;
  address_ranges ranges_;
  std::atomic<trace_sink*> forward_{nullptr};
  int ordinal_ = -1;  ///< Set before the engine reports anything.
};

}  // namespace phasealloc::interpose
