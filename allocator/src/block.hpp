// Blocks and segments: the engine's books of address space.
//
// Invariants (checked by invariants.cpp after every operation in tests):
//  - the blocks of a segment tile it exactly, in address order, linked by prev/next;
//  - no two neighbouring blocks are both `free` with no pending events, nor both `unmapped`
//    (merging is eager);
//  - every `free` block is in exactly one pool set (its pool's), every `allocated` block is in
//    the live map, every `pending_free` block has event_count > 0;
//  - a segment's mapped_bytes is the sum of its blocks that are not `unmapped`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "phasealloc/snapshot.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc::detail {

struct segment;

struct block {
  device_address addr = 0;
  std::size_t bytes = 0;
  std::size_t requested_bytes = 0;  ///< Caller's size while allocated or pending free.
  segment* seg = nullptr;
  block* prev = nullptr;            ///< Lower-address neighbour in the same segment.
  block* next = nullptr;
  block_state state = block_state::free;
  int event_count = 0;              ///< Outstanding cross-stream events (pending_free).
  std::vector<stream_id> stream_uses;  ///< Other streams that used the block (record_stream).
  std::uint64_t free_since = 0;     ///< Pool lookup count when the block became free (for aging).
  std::uint64_t free_epoch = 0;     ///< Phase epoch (changes of phase so far) when it became free.
  std::uint32_t tag = 0;

  bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
};

struct segment {
  device_address addr = 0;
  std::size_t bytes = 0;         ///< Reserved address range.
  std::size_t mapped_bytes = 0;  ///< Backed by memory (== bytes on devices without virtual reserve).
  pool_id pool = 0;
  stream_id stream = 0;
  bool expandable = false;       ///< Grows and shrinks by pages (expandable pools only).
  bool small = false;
  block* first = nullptr;

  device_address end() const noexcept { return addr + bytes; }
};

/// Recycles block objects so splitting does not call the system allocator on the hot path.
class block_arena {
 public:
  block* make() {
    if (!spare_.empty()) {
      block* b = spare_.back();
      spare_.pop_back();
      *b = block{};
      return b;
    }
    return &storage_.emplace_back();
  }
  void recycle(block* b) {
    b->stream_uses.clear();
    spare_.push_back(b);
  }

 private:
  std::deque<block> storage_;
  std::vector<block*> spare_;
};

}  // namespace phasealloc::detail
