// The memory-pressure handler: one more chance for an allocation that ran out of device memory.
//
// Design note
// Rationale: offload:pressure (python/phasealloc/_auto_offload.py) moves idle state (an optimizer's
//   state outside step(), a frozen model outside its forwards) to the host only when the device is
//   full, so that a job that would stop with an out-of-memory error takes a slower step instead, and
//   a job with memory to spare moves nothing. Only the allocation that fails knows when that is.
// Approach: a process-wide handler (a C function: the Python package registers a ctypes callback)
//   that allocate() calls when the engine answers out of memory, outside every engine lock, with the
//   device and the request; when it says it gave device memory back (same-address offload), the
//   engine is asked once more. A thread never enters the handler twice (an allocation the handler
//   makes fails as usual), and the hot path reads nothing of it: only the failure path does.
// Limitations: the handler runs on the allocating thread (autograd's device threads included), so
//   what it does must be safe there; a handler that blocks stalls that allocation.
#pragma once

#include <cstddef>

#include "phasealloc_c_api.h"

namespace phasealloc::interpose {

/// Installs `handler` (nullptr: none), replacing the previous one.
void set_pressure_handler(phasealloc_pressure_fn handler) noexcept;

/// Whether the handler gave back device memory for `bytes` on `device` (false: no handler, the
/// handler freed nothing or failed, or this thread is inside the handler already).
bool relieve_pressure(int device, std::size_t bytes) noexcept;

}  // namespace phasealloc::interpose
