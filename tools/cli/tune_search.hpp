// What `phasealloc tune` decides: the configurations it tries, which of them form the Pareto front
// of peak reserved against device calls, which one it recommends, and the line to paste.
//
// Design note
// Rationale: a job's best allocator configuration depends on the job (how its phases share sizes,
//   how often it regrows), and the cost of each choice is two numbers a user weighs differently:
//   the memory the job holds at its peak (does it fit, what is left for a colocated engine) and
//   the device calls it makes (host time per step). Replaying the job's own trace under each
//   candidate measures both; the front shows every configuration no other beats on both.
// Approach: the search space is one grid per mechanism, each axis a key of that mechanism
//   (default_tune_grids): PyTorch's own PYTORCH_CUDA_ALLOC_CONF keys through the exact `pytorch`
//   model (so "just use expandable segments" can win), and phasealloc's release, reclaim and growth
//   keys. Over several traces (the ranks of one job, or several jobs sharing one configuration),
//   a candidate's peak is the largest peak of its traces (what the GPU must hold) and its calls are
//   summed. A candidate that runs out of memory on any trace at the GPU's size is refused: it
//   appears in no front and is never recommended. Among the front, the recommendation minimizes
//   peak / lowest peak + W x calls / fewest calls (W from --weight calls=W; 0 by default, so the
//   lowest peak, with the fewest calls among equal peaks).
// Limitations: a grid, not an optimizer: a value between two grid points is not tried (--grid
//   replaces the space with the user's own). Calls are counted, not timed (the replay's modelled
//   device time is shown beside them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/replay/replay.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc::cli {

/// One configuration's measures over the traces.
struct tune_candidate {
  std::string spec;
  /// What the replays did with the traces' recorded offload calls (a job recorded under
  /// offload:auto): made them (auto), held them until an allocation ran out (pressure), or none.
  offload_replay offload = offload_replay::none;
  std::size_t moved_bytes = 0;              ///< Offloaded + restored, summed over the traces.
  std::size_t peak_reserved_bytes = 0;      ///< The largest over the traces.
  std::int64_t device_calls = 0;            ///< Summed over the traces.
  std::uint64_t modeled_device_time_ns = 0;  ///< Summed over the traces.
  std::int64_t ooms = 0;                    ///< Summed over the traces; > 0: refused.
  /// Peak reserved while a `generation` phase ran, the largest over the traces (0: no such phase):
  /// shown beside the front (what a colocated rollout engine cannot use), not part of it.
  std::size_t generating_peak_bytes = 0;
  bool refused() const noexcept { return ooms > 0; }
};

/// The default search space, as sweep grids ({a,b} groups multiply).
std::vector<std::string> default_tune_grids();

/// Indices of the candidates that are not refused and that no other such candidate beats on both
/// peak reserved and device calls (ties on both: the first), by peak reserved, lowest first.
std::vector<std::size_t> pareto_front(const std::vector<tune_candidate>& candidates);

/// "calls=W" -> W: a finite number >= 0. Errors name what was wrong.
result<double, std::string> parse_tune_weight(std::string_view text);

/// The front's candidate with the lowest peak / lowest peak + W x calls / fewest calls (ties: the
/// lower peak); nullopt for an empty front.
std::optional<std::size_t> recommend(const std::vector<tune_candidate>& candidates, const std::vector<std::size_t>& front,
                                     double calls_weight);

/// The environment to set for a spec: `PHASEALLOC=1 PHASEALLOC_CONF='policy:[SPEC]'` for phasealloc's
/// policies (with `offload:auto` or `offload:pressure` when `offload` says so), `PYTORCH_CUDA_ALLOC_CONF='KEYS'`
/// for the `pytorch` model (PyTorch's own allocator, no phasealloc), and what to leave unset for plain `pytorch`.
std::string paste_line(std::string_view spec, offload_replay offload = offload_replay::none);
/// "SPEC", or "SPEC + offload:auto" / "SPEC + offload:pressure": how tables name a candidate.
std::string candidate_name(const tune_candidate& c);
/// Whether a spec names PyTorch's allocator (the `pytorch` model), which has no offload.
bool is_pytorch_spec(std::string_view spec);

}  // namespace phasealloc::cli
