// Counts and peaks of a trace: what a replay fidelity test compares against, and what
// `phasealloc inspect` prints.
//
// Live bytes are requested bytes (the alloc events' sizes). Reserved bytes follow the observed
// segment events: seeded segments are the reserve at the start, segment_alloc / segment_map add,
// segment_free / segment_unmap take away. A trace without segment events reports 0 reserved.
// Best effort on invalid traces: frees of unknown ids are ignored, subtractions saturate at 0, and
// byte counts beyond 2^64 - 1 (sizes near 2^64 in a trace replayed with --no-validate) are reported
// as 2^64 - 1; the levels are kept exactly (128 bits), so a later free brings them back.
#pragma once

#include <cstddef>
#include <cstdint>

#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

struct trace_summary {
  std::size_t events = 0;
  std::size_t allocs = 0;          ///< Including seeded ones.
  std::size_t seeded_allocs = 0;
  std::size_t frees = 0;
  std::size_t record_streams = 0;
  std::size_t phase_changes = 0;
  std::size_t empty_caches = 0;
  std::size_t ooms = 0;
  std::uint64_t seeded_live_bytes = 0;  ///< Requested bytes live when recording began.
  std::uint64_t peak_live_bytes = 0;    ///< The floor for any allocator's peak reserved.
  std::uint64_t final_live_bytes = 0;

  std::size_t segment_allocs = 0;       ///< Observed device allocations, not counting seeded segments.
  std::size_t seeded_segments = 0;
  std::size_t segment_frees = 0;
  std::size_t segment_maps = 0;
  std::size_t segment_unmaps = 0;
  std::uint64_t initial_reserved_bytes = 0;  ///< Seeded segments.
  std::uint64_t peak_reserved_bytes = 0;     ///< Of the recording allocator, implied by its segment events.
  std::uint64_t final_reserved_bytes = 0;

  std::uint64_t duration_ns = 0;  ///< Time of the last event.
};

trace_summary summarize(const trace& t);

/// A summary built one event at a time: summarize() with its own book of live allocations, and
/// validate_and_summarize() (trace_validate.hpp) in the same pass as the checks, from the
/// validator's book.
class trace_summary_builder {
 public:
  /// Counts `e`. `live_added`: the bytes it makes live (a new allocation's), `live_removed`: the
  /// bytes it frees (a live allocation's); 0 otherwise.
  void add(const trace_event& e, std::uint64_t live_added, std::uint64_t live_removed) noexcept;
  /// The summary of the events added so far.
  trace_summary finish() const noexcept;

 private:
  __extension__ typedef unsigned __int128 level;  // exact sums of up to 2^64 sizes below 2^64

  trace_summary summary_;
  level live_bytes_ = 0;
  level reserved_bytes_ = 0;
  level seeded_live_bytes_ = 0;
  level initial_reserved_bytes_ = 0;
  level peak_live_bytes_ = 0;
  level peak_reserved_bytes_ = 0;
};

}  // namespace phasealloc
