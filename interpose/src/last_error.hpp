// The last error: what phasealloc_last_error() returns, and the one place that reports errors.
//
// Design note
// Rationale: the C boundary lets nothing through (but allocation failures), so every failure must
//   be readable afterwards. Frees and record_stream calls arrive on whatever thread drops a tensor
//   (autograd workers, NCCL callbacks), so an errno-style thread-local slot would hide them from
//   the Python thread that asks: the slot is process-wide.
// Approach: one mutex-guarded string. report_error() also prints one "phasealloc: ..." line on
//   stderr; set_last_error() only records (for errors the engine already printed).
// Limitations: only the most recent error is kept.
#pragma once

#include <string>
#include <string_view>

namespace phasealloc::interpose {

/// Records `message` as the last error, without printing it.
void set_last_error(std::string_view message) noexcept;
/// Prints "phasealloc: <message>" on stderr and records it as the last error.
void report_error(std::string_view message) noexcept;
/// A copy of the last error ("" when none).
std::string last_error();
void clear_last_error() noexcept;

}  // namespace phasealloc::interpose
