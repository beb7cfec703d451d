#include "phase_book.hpp"

#include <algorithm>

namespace phasealloc::detail {

phase_book::phase_book() {
  phases_.push_back(phase_stats{});
  phases_[unphased].name = "unphased";
  phases_[unphased].intervals = 1;
  ids_.emplace("unphased", unphased);
  stack_.push_back(unphased);
}

phase_id phase_book::intern(std::string_view name) {
  const auto it = ids_.find(std::string(name));
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<phase_id>(phases_.size());
  phases_.push_back(phase_stats{});
  phases_.back().name = std::string(name);
  ids_.emplace(std::string(name), id);
  return id;
}

void phase_book::start_interval(phase_id id, const byte_levels& now) {
  ++phases_[id].intervals;
  interval_ = now;
  // A phase's peaks include the levels it starts at: memory it inherits counts against it.
  last_ = now;
  fold(now, true);
}

phase_id phase_book::push(phase_id id) {
  const phase_id before = current();
  stack_.push_back(id);
  start_interval(id, last_);
  return before;
}

phase_id phase_book::pop() {
  const phase_id before = current();
  if (stack_.size() > 1) {
    stack_.pop_back();
    start_interval(current(), last_);
  }
  return before;
}

phase_id phase_book::replace(phase_id id) {
  const phase_id before = current();
  stack_.back() = id;
  start_interval(id, last_);
  return before;
}

bool phase_book::fold(const byte_levels& levels, bool settled) {
  phase_stats& p = phases_[current()];
  p.peak_allocated_bytes = std::max(p.peak_allocated_bytes, levels.allocated);
  p.peak_active_bytes = std::max(p.peak_active_bytes, levels.active);
  p.peak_requested_bytes = std::max(p.peak_requested_bytes, levels.requested);
  interval_.allocated = std::max(interval_.allocated, levels.allocated);
  interval_.reserved = std::max(interval_.reserved, levels.reserved);
  interval_.active = std::max(interval_.active, levels.active);
  interval_.requested = std::max(interval_.requested, levels.requested);
  // A peak first seen inside an operation (reserved rises before the block is handed out) is
  // measured again when the operation ends at that level, so "unallocated at peak" does not count
  // the block being allocated; a peak an out-of-memory release undid keeps the inside measure.
  if (levels.reserved > p.peak_reserved_bytes ||
      (settled && unsettled_peak_ && levels.reserved == p.peak_reserved_bytes)) {
    p.peak_reserved_bytes = levels.reserved;
    p.reserved_unallocated_at_peak_bytes = levels.reserved - levels.allocated;
    unsettled_peak_ = !settled;
    return true;
  }
  if (settled) unsettled_peak_ = false;
  return false;
}

}  // namespace phasealloc::detail
