// The engine's segments at one moment (phasealloc/snapshot.hpp) as PyTorch's snapshot segments.
//
// Design note
// Rationale: memory_viz's totals and its "Allocator State History" start from the segments list,
//   so it must hold exactly the memory the engine holds, with every block inside its segment.
// Approach: the segment list the live plugin's memory_snapshot() reports too: one segment per
//   mapped run of an engine segment (mapped_runs and torch_block_state, phasealloc/snapshot.hpp);
//   requested bytes only on active blocks; segment_type from the policy's pool (small or large).
// Limitations: none of the frames or per-block history PyTorch can keep.
#pragma once

#include <vector>

#include "phasealloc/export/placed_snapshot_exporter.hpp"
#include "phasealloc/snapshot.hpp"

namespace phasealloc {

std::vector<placed_segment> placed_segments(const snapshot& state);

}  // namespace phasealloc
