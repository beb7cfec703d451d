// phasealloc replay --engine torch: the same replay through PyTorch's own CUDA caching allocator,
// run by phasealloc.torch_replay on the simulated GPU (phasealloc-run --sim-gpu --native).
//
// Design note
// Rationale: the `pytorch` policy is a model; the oracle is the real allocator of the installed
//   torch wheel, which the simulated GPU runs without a GPU. Both engines answer in the same
//   replay_result, so their output compares line by line.
// Approach: the trace is written as records (trace_records.hpp: a JSON header line and fixed-width
//   records that the driver reads with json and struct alone, so the trace grammar keeps one
//   parser, this side's) to a private temporary folder; the driver is started through the
//   launcher with PYTORCH_CUDA_ALLOC_CONF set from the policy's keys (less block_order,
//   phasealloc's own) and the simulated capacity; its JSON becomes a replay_result
//   plus the segment events in order, and names the wheel's order of equal-size free blocks, which
//   `--engine both` hands to the model (spec_for_block_order).
// Limitations: only `pytorch[:KEYS]` specs (the real allocator has no other policies); needs an
//   interpreter with torch (PHASEALLOC_PYTHON, default python3) and the launcher (PHASEALLOC_RUN,
//   else beside this executable, else in the source tree).
#pragma once

#include <string>
#include <vector>

#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc::cli {

struct segment_step {
  std::string action;  ///< segment_alloc, segment_free, segment_map, segment_unmap
  std::size_t bytes = 0;
  bool operator==(const segment_step&) const = default;
};

struct torch_replay {
  replay_result result;
  std::vector<segment_step> segments;
  /// How the wheel orders equal-size free blocks: "segment_age" (torch 2.15), "address" (torch
  /// 2.11), or "" (not found): the `pytorch` policy's block_order key (pytorch_policy.hpp).
  std::string block_order;
};

/// Replays `t` through real PyTorch with `policy_spec` (pytorch[:KEYS]). Throws command_error.
torch_replay replay_with_torch(const trace& t, const std::string& policy_spec, std::size_t capacity_bytes);

/// `policy_spec` set to model a wheel whose block order is `block_order` (torch_replay::block_order),
/// unless the spec names a block_order itself or `block_order` is empty or the model's default.
std::string spec_for_block_order(const std::string& policy_spec, const std::string& block_order);

/// The model's segment events of a replay run with record_segments.
std::vector<segment_step> model_segments(const replay_result& r);

}  // namespace phasealloc::cli
