// Colocated replay: several processes' traces on one model device whose memory they share.
//
// Design note
// Rationale: RLHF placement puts several processes on one GPU (actor and rollout engine, or several
//   ranks). Each has its own caching allocator, and what one of them caches the others cannot get:
//   PyTorch frees its cache when its own cudaMalloc fails, never another process's. Replaying each
//   trace alone gives each the whole device and hides that; a policy that returns memory at phase
//   transitions can fit where one that keeps its cache does not.
// Approach: one model_device (the capacity is shared: its capacity check counts every reservation and
//   mapping, whichever engine made it; the model device is thread-safe and hands each reservation its own
//   addresses), and per trace one engine with its own policy object built from the same spec, as
//   each process would build its own. The traces' events are merged on their common clock: at each
//   step the process whose next event has the smallest time goes, ties to the earlier trace; each
//   trace keeps its own order even where its times go backwards (a k-way merge of heads). Each event
//   is replayed as replay() does (seeded layout for the `pytorch` policies, failed allocations'
//   frees skipped). The device's total is its mapped bytes, sampled after every event.
// Limitations: no per-process CUDA context overhead (a real GPU gives each process's context a few
//   hundred MiB; lower --capacity to model it); one policy for all processes in one run; the total
//   is sampled between events (a transient inside one engine call is counted in that process's
//   peak, not in the total); events complete at once, as in replay().
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/replay/replay.hpp"

namespace phasealloc {

/// An allocation that failed for lack of memory in a colocated replay.
struct colocated_oom {
  std::size_t process = 0;  ///< Index of the trace (command-line order).
  std::size_t event = 0;    ///< Index of the alloc event in that process's own trace.
  std::uint64_t time_ns = 0;
  std::size_t requested_bytes = 0;
};

/// One process of a colocated replay.
struct colocated_process {
  std::size_t events = 0;
  std::size_t peak_reserved_bytes = 0;
  std::size_t peak_allocated_bytes = 0;
  std::size_t peak_requested_bytes = 0;
  std::size_t final_reserved_bytes = 0;
  std::int64_t device_allocs = 0;
  std::int64_t device_frees = 0;
  std::int64_t device_maps = 0;
  std::int64_t device_unmaps = 0;
  std::int64_t ooms = 0;                 ///< Allocations that failed for lack of memory.
  std::optional<colocated_oom> first_oom;
  std::size_t seeded_segments = 0;
};

struct colocated_result {
  std::string policy;  ///< The effective spec.
  std::string device;  ///< "model (whole segments)" or "model (virtual memory)".
  std::size_t capacity_bytes = 0;
  std::size_t events = 0;  ///< All processes' events.
  std::vector<colocated_process> processes;
  /// The device's total (mapped bytes: what counts against the capacity) at its highest, after an
  /// event; the merged event index and time at which it was first reached, and each process's
  /// reserved bytes then.
  std::size_t peak_reserved_bytes = 0;
  std::size_t peak_event = 0;
  std::uint64_t peak_time_ns = 0;
  std::vector<std::size_t> reserved_at_peak_bytes;
  std::int64_t ooms = 0;                   ///< All processes'.
  std::optional<colocated_oom> first_oom;  ///< The first on the common clock.
  std::uint64_t modeled_device_time_ns = 0;
  double wall_seconds = 0;
};

/// Replays `traces` as colocated processes on one model device, each with its own engine and
/// policy built from `policy_spec`. Uses capacity_bytes, granularity_bytes, virtual_memory, cost,
/// check_invariants, use_recorded_layout and progress from `options` (the others are for one
/// trace). Errors: no traces, a bad spec or capacity, a recorded layout that cannot be seeded
/// (naming the process).
result<colocated_result, std::string> replay_colocated(std::span<const trace> traces, std::string_view policy_spec,
                                                       const replay_options& options = {});

}  // namespace phasealloc
