// The process's one event listener (phasealloc_set_event_listener): how a host that keeps
// PyTorch's memory history (the c10 bridge, interpose/c10/) sees every engine's events.
//
// Design note
// Rationale: torch.cuda.memory._record_memory_history asks the allocator for alloc, free and
//   segment events with addresses; the engines already report exactly these to their observer.
// Approach: the observer passes each event here; with no listener set this is one atomic load.
//   The listener (function + context) is published as one immutable heap object, so a reader
//   never sees a function paired with another listener's context. Replaced listeners are leaked
//   (a few bytes, set once or twice per process) because a concurrent event may still use them.
// Limitations: one listener per process.
#pragma once

#include "phasealloc/trace_sink.hpp"
#include "phasealloc_c_api.h"

namespace phasealloc::interpose {

void set_event_listener(phasealloc_event_fn fn, void* context) noexcept;

/// Whether a listener is set now (engine observers then ask their engines for every event).
bool event_listener_set() noexcept;

/// Forwards `record` of device `ordinal` to the listener, if one is set and the op is one of
/// PyTorch's trace actions. Never throws.
void notify_event_listener(int ordinal, const trace_record& record) noexcept;

}  // namespace phasealloc::interpose
