// A point-in-time copy of the engine's segments and blocks (torch.cuda.memory_snapshot's shape).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/types.hpp"

namespace phasealloc {

/// `offloaded_free`: freed while its pages were offloaded (engine.hpp, offload): out of every pool
/// until its range is restored (then free) or every block of the range is freed (then unmapped).
enum class block_state { allocated, pending_free, free, unmapped, offloaded_free };

struct snapshot_block {
  device_address addr = 0;
  std::size_t bytes = 0;
  std::size_t requested_bytes = 0;  ///< 0 unless allocated or pending free.
  block_state state = block_state::free;
  bool offloaded = false;           ///< Some of its pages are offloaded: host memory at its addresses.
};

struct snapshot_segment {
  device_address addr = 0;
  std::size_t bytes = 0;          ///< Reserved address range.
  std::size_t mapped_bytes = 0;   ///< Of which mapped (device memory, or host memory when offloaded).
  std::size_t offloaded_bytes = 0;  ///< Of the mapped bytes, those offloaded: host memory, not the device's.
  std::size_t allocated_bytes = 0;
  std::size_t active_bytes = 0;
  std::size_t requested_bytes = 0;
  stream_id stream = 0;
  std::string pool;
  bool small = false;
  bool expandable = false;
  std::vector<snapshot_block> blocks;
};

struct snapshot {
  std::string policy_spec;
  std::string device_name;
  std::vector<snapshot_segment> segments;  ///< Sorted by address.
};

/// A maximal run of mapped blocks of one segment: what PyTorch's snapshot shows as one segment.
/// PyTorch reports an expandable segment as one segment per contiguous mapped range and has no
/// state for unmapped pages, so an engine segment with unmapped blocks (an expandable reservation,
/// or a segment whose free pages went back) is one run per mapped stretch; the others are one run.
/// The one place both snapshot writers (the live plugin's memory_snapshot(), phasealloc export)
/// take their segment lists from.
struct snapshot_run {
  const snapshot_segment* segment = nullptr;
  std::span<const snapshot_block> blocks;  ///< In address order, contiguous, none unmapped.
  std::size_t total_bytes = 0;
  std::size_t allocated_bytes = 0;  ///< Of allocated blocks.
  std::size_t active_bytes = 0;     ///< Of allocated and pending-free blocks.
  std::size_t requested_bytes = 0;  ///< Requested bytes of the active blocks.
};

/// Every segment's mapped runs, in address order.
std::vector<snapshot_run> mapped_runs(const snapshot& snap);

/// PyTorch's snapshot name of a block state: "active_allocated", "active_pending_free",
/// "inactive" (free, and freed while offloaded); "unmapped" for a state no run holds.
std::string_view torch_block_state(block_state state) noexcept;

}  // namespace phasealloc
