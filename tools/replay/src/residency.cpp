#include "phasealloc/replay/residency.hpp"

#include <algorithm>

namespace phasealloc {

const phase_residency* colocation_headroom::phase(std::string_view name) const noexcept {
  const auto it = std::find_if(phases.begin(), phases.end(), [&](const phase_residency& p) { return p.name == name; });
  return it == phases.end() ? nullptr : &*it;
}

std::vector<transition_summary> colocation_headroom::summarize_transitions() const {
  std::vector<transition_summary> out;
  for (const transition_return& t : transitions) {
    auto it = std::find_if(out.begin(), out.end(), [&](const transition_summary& s) { return s.from == t.from && s.to == t.to; });
    if (it == out.end()) it = out.insert(out.end(), transition_summary{t.from, t.to, 0, 0, 0});
    ++it->count;
    it->returned_total_bytes += t.returned_bytes();
    it->returned_max_bytes = std::max(it->returned_max_bytes, t.returned_bytes());
  }
  return out;
}

residency_meter::residency_meter(std::string_view first_phase, bool weigh_by_time) : by_time_(weigh_by_time) {
  current_ = phase_index(first_phase);
  phases_[current_].intervals = 1;
}

std::size_t residency_meter::phase_index(std::string_view name) {
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    if (phases_[i].name == name) return i;
  }
  phases_.push_back(phase_residency{std::string(name), 0, 0, 0, 0});
  area_.push_back(0);
  entered_bytes_.push_back(reserved_);
  return phases_.size() - 1;
}

void residency_meter::flush() noexcept {
  phases_[current_].duration_ns += current_duration_;
  area_[current_] += current_area_;
  current_duration_ = 0;
  current_area_ = 0;
}

void residency_meter::transition(std::size_t event, std::uint64_t time_ns, std::string_view to,
                                 std::size_t reserved_before_bytes, std::size_t reserved_after_bytes) {
  flush();
  const std::string from = phases_[current_].name;
  reserved_ = reserved_after_bytes;
  current_ = phase_index(to);
  ++phases_[current_].intervals;
  transitions_.push_back(transition_return{event, time_ns, from, std::string(to), reserved_before_bytes,
                                           reserved_after_bytes});
}

colocation_headroom residency_meter::finish() {
  flush();
  colocation_headroom out;
  out.weighted_by = by_time_ ? "time" : "events";
  out.transitions = transitions_;
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    phase_residency p = phases_[i];
    // A phase that lasted no time holds, for the instant it ran, the level it was entered at.
    p.mean_reserved_bytes = p.duration_ns > 0 ? area_[i] / static_cast<double>(p.duration_ns)
                                              : static_cast<double>(entered_bytes_[i]);
    out.phases.push_back(std::move(p));
  }
  return out;
}

}  // namespace phasealloc
