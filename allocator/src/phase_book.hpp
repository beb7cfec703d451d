// The phase table and the per-phase measures.
//
// Approach: the engine calls observe() after every change to its byte counters; the book folds
// the new values into the current phase's peaks and into the peaks of the current *interval*
// (the stretch since the last transition), which policies see at the next transition. A phase's
// peaks are never below the interval's (the interval starts by observing its levels), so a call
// whose levels are all at or below the interval's peaks changes nothing and returns at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "phasealloc/stats.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc::detail {

struct byte_levels {
  std::int64_t allocated = 0;
  std::int64_t reserved = 0;
  std::int64_t active = 0;
  std::int64_t requested = 0;
};

class phase_book {
 public:
  phase_book();

  phase_id intern(std::string_view name);
  phase_id current() const noexcept { return stack_.back(); }
  /// The phase pop() would return to (the current one at the bottom of the stack).
  phase_id below() const noexcept { return stack_.size() > 1 ? stack_[stack_.size() - 2] : stack_.back(); }
  const std::string& name(phase_id id) const { return phases_[id].name; }

  /// Transitions; each returns the phase that was current before.
  phase_id push(phase_id id);
  phase_id pop();  ///< No-op at the bottom (unphased).
  phase_id replace(phase_id id);

  /// Folds the current levels into the current phase and interval. Returns true when reserved
  /// reached a new peak for the phase (the engine then records the largest free block).
  /// `settled`: false inside an operation (reserved rose while growing), true at its end.
  bool observe(const byte_levels& levels, bool settled = true) {
    last_ = levels;
    // Nothing rose past the interval's peaks (never above the phase's), and no peak waits to be
    // settled: every max in fold() would keep its value. Most calls end here (every free, every
    // allocation below the peak).
    if (levels.allocated <= interval_.allocated && levels.active <= interval_.active &&
        levels.requested <= interval_.requested && levels.reserved <= interval_.reserved && !unsettled_peak_) {
      return false;
    }
    return fold(levels, settled);
  }
  void set_largest_free_at_peak(std::int64_t bytes) { phases_[current()].largest_free_block_at_peak_bytes = bytes; }

  phase_stats& current_stats() { return phases_[current()]; }
  const std::vector<phase_stats>& all() const noexcept { return phases_; }
  std::int64_t interval_peak_allocated() const noexcept { return interval_.allocated; }
  std::int64_t interval_peak_reserved() const noexcept { return interval_.reserved; }

 private:
  void start_interval(phase_id id, const byte_levels& now);
  /// observe() without the early return: folds every level into the phase and the interval.
  bool fold(const byte_levels& levels, bool settled);

  std::vector<phase_stats> phases_;
  std::unordered_map<std::string, phase_id> ids_;
  std::vector<phase_id> stack_;
  byte_levels last_;      ///< Levels at the last observe(), to seed a new interval.
  byte_levels interval_;  ///< Peaks since the last transition.
  bool unsettled_peak_ = false;  ///< The current phase's peak was last raised inside an operation.
};

}  // namespace phasealloc::detail
