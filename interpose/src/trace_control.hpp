// Recording an engine's trace to a per-process, per-device file.
//
// Design note
// Rationale: every rank of a torchrun job (and every Ray actor) is its own process with its own
//   engines, and the trace format holds one device; so one file per (process, device), named from
//   a pattern the user gives once (PHASEALLOC_CONF trace:..., or phasealloc.trace(path)).
// Approach: attach_trace builds a trace_recorder for the slot and makes it the observer's forward
//   sink; detach_trace unhooks it (the engine's lock is the barrier, see engine_observer.hpp) and
//   writes the file. A trace that is still running at exit is written by an atexit handler
//   (flush_trace: the recorder keeps recording, so a later flush writes more). A recorder attached
//   mid-run first gets a phase event naming the current phase, so the trace starts in it.
//   Checkpoints: a process can be killed with no exit handler run (Ray ends every worker of a job
//   with SIGKILL when its driver exits; vLLM's engine processes go with their parent), so the
//   running traces are also written at phase transitions and at empty_cache (which frameworks
//   call at the end of an operation: verl after each), by engine_registry, each file replaced
//   whole (temporary file, then rename: a reader never sees half of one). A process that holds
//   memory but never changes phase (a Ray actor that allocates, answers and waits to be killed)
//   would have none: a background thread, started with the first trace, also offers a checkpoint
//   every 250 ms (engine_registry::quiet_checkpoint_period). A checkpoint waits 99 times the last
//   one's duration after it, so writing takes at most 1% of the job's time.
// Limitations: what a killed process did after its last checkpoint is not in its trace (the last
//   250 ms, or whatever the 1% rule deferred). A checkpoint holds the registry's lock while it
//   writes, so a phase transition or a new engine waits for it (at most 1% of the time).
//   Allocations made before the trace started are unknown to the recorder; their frees
//   are counted as unmatched (trace_recorder::unmatched_events), not written.
#pragma once

#include <string>
#include <string_view>

#include "device_slot.hpp"

namespace phasealloc::interpose {

/// The file of device `ordinal` for `pattern`: %d -> ordinal, %R -> `role` (attach_trace passes the
/// configured role, interpose_config.hpp, else the process title's: process_title.hpp), then
/// %p / %r / %% (trace_path.hpp). Without %d,
/// ordinal N > 0 gets ".devN" before the extension.
std::string trace_path_for(std::string_view pattern, int ordinal, std::string_view role);

/// Starts recording `slot` to trace_path_for(pattern, slot.ordinal). `settings` goes into the
/// trace's metadata (the effective configuration).
void attach_trace(device_slot& slot, std::string_view pattern, std::string_view settings);

/// Stops recording `slot` and writes its file. Returns an error message, or "" on success.
std::string detach_trace(device_slot& slot);

/// Writes what `slot` recorded so far without stopping. Returns an error message, or "".
std::string flush_trace(const device_slot& slot);

}  // namespace phasealloc::interpose
