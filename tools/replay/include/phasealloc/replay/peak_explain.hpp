// What the reserved bytes at a replay's peak hold besides live blocks: the mapped bytes that are
// not allocated, by pool and by why they could not be returned (phasealloc replay --explain-peak).
//
// Design note
// Rationale: a policy's waste is its peak reserved less its peak allocated. To lower it one has to
//   know, at the moment of the peak, which mapped bytes are free and why they are still mapped:
//   free bytes in pages that also hold a live block cannot be unmapped without moving the block
//   (small-pool pages pinned by a few long-lived blocks, the tail of a large block that does not
//   end on a page); whole free pages between live pages are holes a release or reclaim left
//   mapped; whole free pages next to unmapped space or the end of a reservation were mapped ahead
//   of need (or are a whole-segment allocator's cached tail). The same at the moment of the peak
//   allocated: what is mapped and free then is a floor under the waste.
// Approach: replay the trace once to find the events after which the reserved and the allocated
//   levels are highest (replay_result::peak_reserved_event, peak_allocated_event), replay it again
//   (replays are deterministic) with a snapshot right after each, and walk each segment's blocks page by page (the device's
//   granularity, the unmapping unit): a mapped page is live (holds allocated or pending-free
//   bytes) or empty; maximal runs of empty pages are holes (live pages or nothing mapped on
//   neither side: between live pages) or edges (unmapped space or the reservation's end on a
//   side). Free bytes in live pages are "in live pages", counted with the number of live blocks
//   that pin each page.
// Limitations: the level is the one after a whole trace event; a peak that lasted only inside one
//   engine call (a growth followed by a release in the same allocation) is not seen. Which phase
//   made a free run is not known (free blocks carry no birth stamp); the phase current at the
//   peak is reported.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/replay/replay.hpp"
#include "phasealloc/snapshot.hpp"
#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

/// A pool's mapped bytes at one moment, split by why the free ones are mapped.
struct pool_peak_part {
  std::string pool;
  std::size_t mapped_bytes = 0;
  std::size_t allocated_bytes = 0;        ///< Of allocated and pending-free blocks.
  std::size_t live_page_free_bytes = 0;   ///< Free bytes in pages that also hold live bytes.
  std::size_t live_pages = 0;             ///< Pages holding live bytes and some free bytes.
  std::size_t live_pages_one_block = 0;   ///< Of those, pages held by a single live block.
  std::size_t hole_bytes = 0;             ///< Whole empty pages between live pages.
  std::size_t holes = 0;                  ///< Runs of them.
  std::size_t largest_hole_bytes = 0;
  std::size_t small_hole_bytes = 0;       ///< Of hole_bytes, in runs of at most 4 pages.
  std::size_t edge_bytes = 0;             ///< Whole empty pages next to unmapped space or a reservation's end.
  std::size_t edges = 0;
  std::size_t free_bytes() const noexcept { return mapped_bytes - allocated_bytes; }
};

/// The layout right after one trace event.
struct layout_moment {
  std::size_t event = 0;
  std::string phase;  ///< The phase current then.
  std::size_t reserved_bytes = 0;
  std::size_t allocated_bytes = 0;  ///< Of allocated and pending-free blocks.
  std::vector<pool_peak_part> pools;  ///< In the order they first appear in the snapshot.
};

struct peak_explanation {
  std::string policy;
  std::size_t page_bytes = 0;            ///< The unit pages are counted in (the device's granularity).
  std::size_t peak_reserved_bytes = 0;   ///< The run's peaks (the engine's books).
  std::size_t peak_allocated_bytes = 0;
  /// After the event that left the highest reserved level: what the peak holds besides live bytes.
  layout_moment at_peak_reserved;
  /// After the event that left the most bytes allocated: the waste (peak reserved - peak allocated)
  /// is at least what is mapped and free here.
  layout_moment at_peak_allocated;
};

/// The breakdown of one layout, pages of page_bytes.
std::vector<pool_peak_part> explain_layout(const snapshot& layout, std::size_t page_bytes);

/// Replays `t` three times with `policy_spec` (then with a snapshot at the peak reserved, and at the
/// peak allocated) and explains both layouts.
result<peak_explanation, std::string> explain_peak(const trace& t, std::string_view policy_spec,
                                                   const replay_options& options = {});

/// A few lines of text: the free bytes at the peak by pool and kind.
std::string render_peak_explanation(const peak_explanation& e);

}  // namespace phasealloc
