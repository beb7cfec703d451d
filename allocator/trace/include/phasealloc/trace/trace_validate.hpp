// Checks that a trace means something a replay can follow.
//
// What is checked (each failure names the event index and what was wrong):
//   - the version is one this build reads;
//   - time never decreases;
//   - an allocation id is allocated at most once; a free or record_stream names a live id, and a
//     free's bytes equal the allocation's;
//   - the same for segment ids (segment_alloc / segment_free);
//   - an alloc or segment_alloc holds at most trace_max_event_bytes (1 PiB: beyond any GPU, and far
//     from overflow when sizes are summed or rounded);
//   - phase names index the string table; stream ordinals are below meta.stream_count;
//   - flags hold only known bits, seeded only on alloc / segment_alloc, and every seeded event
//     comes before every other event.
// Not checked: segment_map / segment_unmap ids (informational), tags (opaque).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_format.hpp"
#include "phasealloc/trace/trace_summary.hpp"

namespace phasealloc {

/// The largest alloc or segment_alloc a valid trace holds: 1 PiB.
inline constexpr std::uint64_t trace_max_event_bytes = std::uint64_t{1} << 50;

struct trace_validation_error {
  std::size_t event_index = 0;              ///< Index into trace::events (events.size() for whole-trace problems).
  trace_event_op op = trace_event_op::alloc;
  std::string problem;

  /// "event 12 (free): allocation id 7 is not live (freed at event 9)".
  std::string message() const;
};

result<std::monostate, trace_validation_error> validate(const trace& t);

/// validate(), and for a valid trace what summarize(t) gives, from the same pass over the events
/// (one pass and one book of live allocations instead of two).
result<trace_summary, trace_validation_error> validate_and_summarize(const trace& t);

}  // namespace phasealloc
