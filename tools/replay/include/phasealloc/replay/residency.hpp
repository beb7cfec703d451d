// Colocation headroom: what a job holds while each of its phases runs, and what it gives back at
// each phase transition.
//
// Design note
// Rationale: in RLHF a rollout engine (vLLM, SGLang) often shares the GPU with the trainer. What
//   it can use while the trainer generates is the device minus what the trainer's allocator holds
//   then, not minus the trainer's overall peak. A phase's peak reserved says how much room is
//   guaranteed during that phase; the time-weighted mean says how much is free on average (how
//   long the room lasts); the bytes returned at a transition say how promptly it appears.
// Approach: the replay feeds the meter the reserved level after every event, with the event's
//   time. The level between two events is the one after the first, so a phase accrues
//   level x time for as long as it is current. Transitions are measured around the engine's
//   set_phase: reserved before minus reserved after is what the policy's transition release
//   returned. A trace whose events all share one time is weighted by events instead (said in
//   `weighted_by`).
// Limitations: the level is sampled after whole trace events, so a level that lasts no time
//   (inside an allocation that released and regrew) is not seen by the mean; the peak comes from
//   the engine's phase books, which do see it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace phasealloc {

/// Reserved bytes while one phase was current, over all its intervals.
struct phase_residency {
  std::string name;
  std::int64_t intervals = 0;
  std::uint64_t duration_ns = 0;        ///< Time current (events, when weighted by events).
  std::size_t peak_reserved_bytes = 0;  ///< torch's reserved_bytes.all.peak, over the phase.
  double mean_reserved_bytes = 0;       ///< Time-weighted mean of reserved_bytes.all.current.
};

/// One phase transition and what the policy returned to the device at it.
struct transition_return {
  std::size_t event = 0;  ///< Index of the phase event.
  std::uint64_t time_ns = 0;
  std::string from;
  std::string to;
  std::size_t reserved_before_bytes = 0;
  std::size_t reserved_after_bytes = 0;
  std::size_t returned_bytes() const noexcept {
    return reserved_before_bytes > reserved_after_bytes ? reserved_before_bytes - reserved_after_bytes : 0;
  }
};

/// Per (from, to) pair: the transitions of that kind, summed.
struct transition_summary {
  std::string from;
  std::string to;
  std::size_t count = 0;
  std::size_t returned_total_bytes = 0;
  std::size_t returned_max_bytes = 0;
  double returned_mean_bytes() const noexcept {
    return count == 0 ? 0.0 : static_cast<double>(returned_total_bytes) / static_cast<double>(count);
  }
};

struct colocation_headroom {
  std::string weighted_by = "time";  ///< "time", or "events" for a trace without time.
  std::vector<phase_residency> phases;       ///< In the order the phases first ran.
  std::vector<transition_return> transitions;  ///< Every transition, in order.

  const phase_residency* phase(std::string_view name) const noexcept;
  /// The transitions grouped by (from, to), in the order each pair first occurred.
  std::vector<transition_summary> summarize_transitions() const;
};

/// Accumulates a colocation_headroom from the levels a replay sees.
class residency_meter {
 public:
  /// weigh_by_time: false when every event of the trace has the same time.
  residency_meter(std::string_view first_phase, bool weigh_by_time);
  /// Before event at `time_ns` is replayed: the level since the previous event accrues to the
  /// current phase.
  void advance(std::uint64_t time_ns) noexcept {
    if (!by_time_) {
      current_area_ += started_ ? static_cast<double>(reserved_) : 0.0;
      current_duration_ += started_ ? 1 : 0;
      started_ = true;
      return;
    }
    if (started_ && time_ns > last_ns_) {
      current_duration_ += time_ns - last_ns_;
      current_area_ += static_cast<double>(reserved_) * static_cast<double>(time_ns - last_ns_);
    }
    if (!started_ || time_ns > last_ns_) last_ns_ = time_ns;
    started_ = true;
  }
  /// After an event: the reserved level it left.
  void level(std::size_t reserved_bytes) noexcept { reserved_ = reserved_bytes; }
  /// A transition at `event`; `reserved_before_bytes` is the level before set_phase, level() then
  /// takes the one after.
  void transition(std::size_t event, std::uint64_t time_ns, std::string_view to, std::size_t reserved_before_bytes,
                  std::size_t reserved_after_bytes);
  /// The result; peak_reserved_bytes of each phase is left for the caller (the engine's books).
  colocation_headroom finish();

 private:
  std::size_t phase_index(std::string_view name);
  /// Adds the current phase's running sums to its books.
  void flush() noexcept;

  bool by_time_;
  std::vector<phase_residency> phases_;
  std::vector<double> area_;  ///< Per phase: sum of level x duration (flushed).
  double current_area_ = 0;  ///< The current phase's, since its sums were last flushed.
  std::uint64_t current_duration_ = 0;
  std::vector<std::size_t> entered_bytes_;  ///< Per phase: the level it was first entered at.
  std::vector<transition_return> transitions_;
  std::size_t current_ = 0;
  std::size_t reserved_ = 0;
  std::uint64_t last_ns_ = 0;
  bool started_ = false;
};

}  // namespace phasealloc
