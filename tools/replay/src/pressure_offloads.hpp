// offload:pressure replayed from a job recorded under offload:auto (replay_options::offload).
//
// Rationale: a job recorded with offload:auto carries its offload and restore calls: what left the
//   GPU at each transition, and when it came back. Under offload:pressure the same classes leave only
//   when an allocation would otherwise run out of memory, and come back at the same transitions. The
//   recorded calls are therefore the schedule pressure draws on, and one recording answers both
//   modes (and, ignoring the calls, no offload at all).
// Approach: a recorded offload call is held, not made; the allocations it names stay on the GPU. An
//   allocation that runs out of memory makes the oldest held call, then tries again, until it fits
//   or nothing is held (the library's pressure handler offloads idle classes until the request
//   fits; the recorded calls are those classes, in the order auto sent them away). A recorded
//   restore brings back what had left and drops what was still held (it never left). Allocations
//   are named by their trace ids, so a freed allocation leaves the schedule and a reused address is
//   never mistaken for it.
// Limitations: the library picks the largest idle classes first; the replay takes the calls oldest
//   first. A call is made whole, as the library moves a class whole.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace phasealloc::replay_detail {

class pressure_offloads {
 public:
  /// A recorded offload call, by its allocations' ids: held until an allocation needs the room.
  void hold(const std::vector<std::uint64_t>& ids);
  /// A recorded restore call: the ids among `ids` that had left (to restore now); those still
  /// held are dropped, since they never left.
  std::vector<std::uint64_t> restore(const std::vector<std::uint64_t>& ids);
  /// Allocation `id` was freed: no longer anyone's to move.
  void forget(std::uint64_t id) {
    if (!held_.empty()) held_.erase(id);
    if (!away_.empty()) away_.erase(id);
  }
  /// The oldest held call with an allocation still held, now made: its ids, marked away (empty when
  /// nothing is held).
  std::vector<std::uint64_t> make_next();
  /// Calls made so far.
  std::int64_t calls_made() const noexcept { return made_; }

 private:
  std::deque<std::vector<std::uint64_t>> calls_;  ///< Held calls, oldest first.
  std::uint64_t first_call_ = 0;                  ///< The number of calls_.front().
  std::unordered_map<std::uint64_t, std::uint64_t> held_;  ///< id -> the number of the call holding it
  std::unordered_set<std::uint64_t> away_;                 ///< ids whose call was made
  std::int64_t made_ = 0;
};

}  // namespace phasealloc::replay_detail
