// The engine's segments at one moment (phasealloc/snapshot.hpp) as PyTorch's snapshot segments.
//
// Design note
// Rationale: memory_viz's totals and its "Allocator State History" start from the segments list,
//   so it must hold exactly the memory the engine holds, with every block inside its segment.
// Approach: what the live plugin's memory_snapshot() reports (interpose/src/snapshot_json.cpp):
//   one segment per contiguous mapped run of an engine segment (an expandable reservation, or a
//   segment whose free pages were given back, is split at its unmapped blocks, as PyTorch reports
//   expandable segments); states allocated -> active_allocated, pending_free ->
//   active_pending_free, free -> inactive; requested bytes only on active blocks; segment_type
//   from the policy's pool (small or large).
// Limitations: none of the frames or per-block history PyTorch can keep.
#pragma once

#include <vector>

#include "phasealloc/import/placed_snapshot_exporter.hpp"
#include "phasealloc/snapshot.hpp"

namespace phasealloc {

std::vector<placed_segment> placed_segments(const snapshot& state);

}  // namespace phasealloc
