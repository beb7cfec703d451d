// The five block stats an allocation and a free move (allocation, allocated_bytes, active,
// active_bytes, requested_bytes), and the batch that books the hot pair cheaply.
//
// Design note
// Rationale: each of the five is a torch-style stat (current, peak, allocated, freed) kept for all
//   pools and for the small or large ones: an allocate + free pair made twenty current updates,
//   ten peak checks and twenty accumulator additions (~100 instructions).
// Approach: the deferred free (deferred_free.cpp) lowers the currents at once (levels() and the
//   phase book stay exact) but leaves the `freed` sums waiting. When the next allocation takes the
//   same block back for the same requested size, the currents return to where they were before the
//   free, which the peaks already cover: no peak check, and the pair's `allocated` and `freed`
//   sums go to a batch of three counters per pool kind (pairs, bytes, requested bytes). The batch
//   is folded into the stats before anyone reads them (engine::stats, reset_accumulated_stats); a
//   deferred free that is not taken back books its `freed` sums when it settles.
// Limitations: only the free-then-allocate pair of one block is batched; every other allocation
//   and free books the five stats in full.
#pragma once

#include <array>
#include <cstdint>

#include "phasealloc/stats.hpp"

namespace phasealloc::detail {

/// Current levels only (a free whose accumulators wait, or the allocation that undoes it).
inline void shift_block_levels(device_stats& s, bool small, std::int64_t sign, std::int64_t bytes,
                               std::int64_t requested) noexcept {
  const std::size_t t = small ? 1 : 2;
  for (const std::size_t i : {std::size_t{0}, t}) {
    s.allocation.by_type[i].current += sign;
    s.active.by_type[i].current += sign;
    s.allocated_bytes.by_type[i].current += sign * bytes;
    s.active_bytes.by_type[i].current += sign * bytes;
    s.requested_bytes.by_type[i].current += sign * requested;
  }
}

/// The `freed` sums of `count` frees of `bytes` (and `requested`) each, already lowered.
inline void add_block_freed(device_stats& s, bool small, std::int64_t count, std::int64_t bytes,
                            std::int64_t requested) noexcept {
  const std::size_t t = small ? 1 : 2;
  for (const std::size_t i : {std::size_t{0}, t}) {
    s.allocation.by_type[i].freed += count;
    s.active.by_type[i].freed += count;
    s.allocated_bytes.by_type[i].freed += bytes;
    s.active_bytes.by_type[i].freed += bytes;
    s.requested_bytes.by_type[i].freed += requested;
  }
}

/// Free-then-allocate pairs of one block whose accumulators are not booked yet.
class pair_batch {
 public:
  void add(bool small, std::int64_t bytes, std::int64_t requested) noexcept {
    counts& c = by_kind_[small ? 1 : 0];
    ++c.pairs;
    c.bytes += bytes;
    c.requested += requested;
  }
  /// Books every pair's `allocated` and `freed` sums into `s` and empties the batch.
  void fold(device_stats& s) noexcept {
    for (std::size_t k = 0; k < 2; ++k) {
      counts& c = by_kind_[k];
      if (c.pairs == 0) continue;
      const bool small = k == 1;
      add_block_freed(s, small, c.pairs, c.bytes, c.requested);
      const std::size_t t = small ? 1 : 2;
      for (const std::size_t i : {std::size_t{0}, t}) {
        s.allocation.by_type[i].allocated += c.pairs;
        s.active.by_type[i].allocated += c.pairs;
        s.allocated_bytes.by_type[i].allocated += c.bytes;
        s.active_bytes.by_type[i].allocated += c.bytes;
        s.requested_bytes.by_type[i].allocated += c.requested;
      }
      c = {};
    }
  }

 private:
  struct counts {
    std::int64_t pairs = 0;
    std::int64_t bytes = 0;
    std::int64_t requested = 0;
  };
  std::array<counts, 2> by_kind_{};  ///< [0] large pools, [1] small pools
};

}  // namespace phasealloc::detail
