// The engine's snapshot in the shape of torch.cuda.memory_snapshot().
//
// Design note
// Rationale: users (and torch's own _memory_viz) read snapshots as a list of segment dicts with
//   block lists that tile each segment. torch shows an expandable segment as one segment per
//   contiguous mapped range; an engine segment may also hold unmapped pages (released pages of a
//   virtual-memory device), which torch has no state for.
// Approach: every maximal run of mapped blocks in an engine segment becomes one torch segment
//   (mapped_runs and torch_block_state, phasealloc/snapshot.hpp, which phasealloc export shares:
//   total_size = the run's bytes; blocks in address order; unmapped blocks are left out).
//   segment_pool_id is (0, 0) (the default pool), frames are empty (no stacks are recorded), and
//   "pool" names the policy's pool.
// Limitations: no per-block history or stack frames.
#pragma once

#include <nlohmann/json.hpp>

#include "phasealloc/snapshot.hpp"

namespace phasealloc::interpose {

/// Appends the torch segment dicts of `snap` (device `ordinal`) to `out` (a JSON array).
void append_snapshot_segments(const snapshot& snap, int ordinal, nlohmann::json& out);

}  // namespace phasealloc::interpose
