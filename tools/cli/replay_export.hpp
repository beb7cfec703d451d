// phasealloc export --policy SPEC: replay a trace with a policy and write the layout it placed as a
// PyTorch memory snapshot (placed_snapshot_exporter.hpp).
//
// Design note
// Rationale: an export memory_viz can use must show real segments: what the chosen allocator
//   would have reserved, and where each block lay inside them.
// Approach: the replay's observer turns each engine event into PyTorch's trace action (block
//   events carry the requested size, segment events the segment's bytes), and the engine's final
//   snapshot becomes the segments, one per contiguous mapped run (as the live plugin's
//   memory_snapshot() reports them, interpose/src/snapshot_json.cpp).
// Limitations: see placed_snapshot_exporter.hpp.
#pragma once

#include <string>

#include "phasealloc/import/placed_snapshot_exporter.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc::cli {

/// Replays `t` under `policy_spec` and returns its placed layout; the replay's numbers go to `result`.
placed_snapshot replay_layout(const trace& t, const std::string& policy_spec, const replay_options& options,
                              replay_result& result);

}  // namespace phasealloc::cli
