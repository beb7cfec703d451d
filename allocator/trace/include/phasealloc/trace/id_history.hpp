// The exact set of every id a trace has created so far: what validation needs to reject an id
// that is allocated again after its free.
//
// Design note
// Rationale: validation used to keep every id it had seen, live or not, in an unordered_map: 8.5 M
//   nodes on a 17 M-event trace, most of its time. Recorders, importers and synth number
//   allocations 0, 1, 2, ...; a set of such ids is a handful of ranges.
// Approach: an id above every earlier one extends the last run of consecutive ids (or starts a
//   new run): no hashing at all for increasing ids. Any other new id goes to a flat hash set.
//   Membership is the last run (one compare), a binary search over the runs, then the hash set.
// Limitations: increasing ids with gaps cost a run (16 bytes) each, shuffled ids a hash slot each;
//   both are exact, only slower. Ids are never removed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "phasealloc/trace/flat_id_map.hpp"

namespace phasealloc {

class id_history {
 public:
  /// Adds `id`; false when it was already there.
  bool insert(std::uint64_t id) {
    if (runs_.empty() || id > runs_.back().last) {
      if (!runs_.empty() && id == runs_.back().last + 1) {
        runs_.back().last = id;
      } else {
        runs_.push_back(run{id, id});
      }
      return true;
    }
    if (in_runs(id)) return false;
    return others_.try_emplace(id, true).second;
  }

  bool contains(std::uint64_t id) const noexcept { return in_runs(id) || others_.contains(id); }

 private:
  struct run {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
  };

  bool in_runs(std::uint64_t id) const noexcept {
    if (runs_.empty() || id > runs_.back().last) return false;
    if (id >= runs_.back().first) return true;
    // The last run starting at or below id.
    const auto after = std::upper_bound(runs_.begin(), runs_.end(), id,
                                        [](std::uint64_t v, const run& r) { return v < r.first; });
    return after != runs_.begin() && id <= std::prev(after)->last;
  }

  std::vector<run> runs_;  ///< Ids that came above all earlier ones, as increasing disjoint runs.
  flat_id_map<bool> others_;  ///< Every other id.
};

}  // namespace phasealloc
