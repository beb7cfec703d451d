// A replay's real layout as a PyTorch memory snapshot pickle: the segments and addresses a policy
// placed, and its history, so torch.cuda._memory_viz reports the replay's own reserved and
// allocated bytes (phasealloc export --policy SPEC).
//
// Design note
// Rationale: memory_viz reads segments (what is reserved, and which blocks lie where) and the
//   device trace (alloc / free / segment events by address). Addresses synthesized from an
//   address-free trace have no segments behind them; only a replay knows where each block went.
// Approach: the replay side (tools/export) collects the engine's events with their addresses and
//   the segments at the end, already in PyTorch's vocabulary; this file only writes the pickle,
//   in the layout torch.cuda.memory._snapshot() returns: {"segments": [{device, address,
//   total_size, allocated_size, active_size, requested_size, stream, segment_type,
//   segment_pool_id, is_expandable, frames, blocks: [{address, size, requested_size, state,
//   frames}]}], "device_traces": [[{action, addr, size, stream, time_us, frames, ...}]] (device + 1
//   lists), "allocator_settings", "external_annotations"}. A segment's four sizes are summed from
//   its blocks, as PyTorch does. Entries carry the phase as "user_metadata" (what
//   snapshot_exporter.hpp writes and import_snapshot reads back as phases) and an oom carries
//   "device_free".
// Limitations: no stack frames; one device per snapshot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "phasealloc/status.hpp"

namespace phasealloc {

struct placed_trace_entry {
  std::string action;  ///< alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, segment_unmap, oom
  std::uint64_t addr = 0;
  std::size_t size = 0;
  std::uint64_t stream = 0;
  std::uint64_t time_us = 0;
  std::string phase;            ///< Written as user_metadata ("" when the trace has no phases).
  std::size_t device_free = 0;  ///< oom only: bytes the device had left.
};

struct placed_block {
  std::uint64_t addr = 0;
  std::size_t size = 0;
  std::size_t requested = 0;  ///< 0 for an inactive block.
  std::string state;          ///< active_allocated, active_pending_free, inactive
};

struct placed_segment {
  std::uint64_t addr = 0;
  std::uint64_t stream = 0;
  bool small = false;  ///< segment_type "small" (else "large"): the policy's pool kind.
  bool expandable = false;
  std::string pool;                  ///< The policy's pool name (an extra key; memory_viz ignores it).
  std::vector<placed_block> blocks;  ///< Contiguous from addr; their sizes add up to the segment's.
};

struct placed_snapshot {
  std::uint32_t device = 0;
  std::string allocator_settings;
  std::vector<placed_segment> segments;
  std::vector<placed_trace_entry> entries;
};

/// The pickle bytes of `s`.
std::string export_placed_snapshot(const placed_snapshot& s);
/// Writes them to `path`; the error names the file.
result<std::monostate, std::string> export_placed_snapshot_file(const placed_snapshot& s,
                                                                const std::filesystem::path& path);

}  // namespace phasealloc
