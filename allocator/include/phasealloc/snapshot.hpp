// A point-in-time copy of the engine's segments and blocks (torch.cuda.memory_snapshot's shape).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "phasealloc/types.hpp"

namespace phasealloc {

enum class block_state { allocated, pending_free, free, unmapped };

struct snapshot_block {
  device_address addr = 0;
  std::size_t bytes = 0;
  std::size_t requested_bytes = 0;  ///< 0 unless allocated or pending free.
  block_state state = block_state::free;
};

struct snapshot_segment {
  device_address addr = 0;
  std::size_t bytes = 0;          ///< Reserved address range.
  std::size_t mapped_bytes = 0;   ///< Of which backed by memory.
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

}  // namespace phasealloc
