// A replay's real layout as a PyTorch memory snapshot pickle: the segments and addresses a policy
// placed, and its history, so torch.cuda._memory_viz reports the replay's own reserved and
// allocated bytes (phasealloc export --policy SPEC).
//
// Design note
// Rationale: memory_viz reads segments (what is reserved, and which blocks lie where) and the
//   device trace (alloc / free / segment events by address). Addresses synthesized from an
//   address-free trace have no segments behind them; only a replay knows where each block went.
// Approach: the caller (the CLI) replays the trace with a policy, collects the engine's events
//   with their addresses and the final segments, and passes them here in PyTorch's vocabulary;
//   this file only writes the pickle, in the layout snapshot_exporter.hpp documents.
// Limitations: time_us is the event's position in the replay (the engine's events carry no
//   time); no stack frames; one device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace phasealloc {

struct placed_trace_entry {
  std::string action;  ///< alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, oom
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  std::uint64_t stream = 0;
  std::uint64_t time_us = 0;
};

struct placed_block {
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  std::uint64_t requested = 0;
  std::string state;  ///< active_allocated, active_pending_free, inactive
};

struct placed_segment {
  std::uint64_t addr = 0;
  std::uint64_t stream = 0;
  bool small = false;
  bool expandable = false;
  std::vector<placed_block> blocks;  ///< Contiguous from addr; their sizes add up to the segment's.
};

struct placed_snapshot {
  std::uint32_t device = 0;
  std::string allocator_settings;
  std::vector<placed_segment> segments;
  std::vector<placed_trace_entry> entries;
};

/// The pickle bytes of `s` (segment sizes are the sums of their blocks).
std::string export_placed_snapshot(const placed_snapshot& s);

}  // namespace phasealloc
