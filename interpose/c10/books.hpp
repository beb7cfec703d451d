// phasealloc's books in c10's types: torch.cuda.memory_stats() and torch.cuda.memory_snapshot()
// read them from these structs when the bridge is the allocator.
//
// Design note
// Rationale: the library already answers both in PyTorch's key names and snapshot shape (JSON,
//   interpose/src/stats_json.cpp and snapshot_json.cpp, used by every host); the bridge only
//   changes the container, so the numbers are the same ones `phasealloc.summary()` prints.
// Approach: parse the library's JSON and fill DeviceStats / SegmentInfo field by field. These
//   run on stats and snapshot calls, never on the allocation path.
// Limitations: fields phasealloc has no counterpart for (gc_counter, registration_counter,
//   per-private-pool reserved bytes) stay at their defaults.
#pragma once

#include <cstddef>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>

namespace phasealloc::c10_bridge {

/// The engine's stats of `device` (zeros for a device it never allocated on). Throws
/// c10::Error with the library's message on failure.
c10::CachingDeviceAllocator::DeviceStats engine_stats(c10::DeviceIndex device);

/// Adds `more` to `into`, stat by stat (used to add the native allocator's private pools).
void add_stats(c10::CachingDeviceAllocator::DeviceStats& into, const c10::CachingDeviceAllocator::DeviceStats& more);

/// Every engine's segments, blocks contiguous from each segment's address as PyTorch expects.
std::vector<c10::CachingDeviceAllocator::SegmentInfo> engine_segments();

/// The largest free cached block of `device`'s engine (0 when none).
std::size_t engine_largest_free_block(c10::DeviceIndex device);

}  // namespace phasealloc::c10_bridge
