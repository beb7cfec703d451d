// Blocks and segments: the engine's books of address space.
//
// Invariants (checked by invariants.cpp after every operation in tests):
//  - the blocks of a segment tile it exactly, in address order, linked by prev/next;
//  - no two neighbouring blocks are both `free` with no pending events, nor both `unmapped`
//    (merging is eager);
//  - every `free` block is in exactly one pool (its pool's), every `allocated` block is in
//    the live map, every `pending_free` block has event_count > 0;
//  - a segment's mapped_bytes is the sum of its blocks that are not `unmapped`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory_resource>
#include <set>
#include <vector>

#include "phasealloc/snapshot.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc::detail {

struct segment;
struct block;
class block_pool;

/// A position in a pool's order without a block: what a pool's lower_bound searches for.
struct fit_key {
  stream_id stream = 0;
  std::size_t bytes = 0;
  std::uint64_t age_rank = 0;
  device_address addr = 0;
};

/// A pool's order: (stream, size, age rank, address). Defined below, once block and segment are.
/// The age rank (block::age_rank) is 0 in a pool without pool_traits::segment_age_order, so there
/// equal sizes go by address (PyTorch up to 2.11: BlockComparatorSize); with it, by the segment's
/// creation order first (PyTorch 2.15: BlockComparatorSizeCounterAddress).
struct block_order {
  using is_transparent = void;  // lower_bound takes a fit_key: no block and segment built to search
  bool operator()(const block* a, const block* b) const noexcept;
  bool operator()(const block* a, const fit_key& k) const noexcept;
  bool operator()(const fit_key& k, const block* b) const noexcept;
};

/// A pool's free blocks (block_pool.hpp).
using pool_set = std::pmr::set<block*, block_order>;

struct block {
  device_address addr = 0;
  std::size_t bytes = 0;
  std::size_t requested_bytes = 0;  ///< Caller's size while allocated or pending free.
  segment* seg = nullptr;
  stream_id stream = 0;             ///< seg->stream, kept here: the pools' order compares it without a hop.
  std::uint64_t age_rank = 0;       ///< seg->age_rank, kept here for the same reason.
  block* prev = nullptr;            ///< Lower-address neighbour in the same segment.
  block* next = nullptr;
  block_state state = block_state::free;
  int event_count = 0;              ///< Outstanding cross-stream events (pending_free).
  std::vector<stream_id> stream_uses;  ///< Other streams that used the block (record_stream).
  std::uint64_t free_since = 0;     ///< Pool lookup count when the block became free (for aging).
  std::uint64_t free_epoch = 0;     ///< Phase epoch (changes of phase so far) when it became free.
  std::uint32_t tag = 0;
  /// The engine's interval count (transitions so far) when the block was last handed out: the
  /// policy learns lifetimes from it (transition_context::live_blocks).
  std::uint32_t birth_interval = 0;
  /// The pool holding the block (nullptr: none) and its place there, so that taking it out needs
  /// no search (block_pool::erase).
  const block_pool* pooled_in = nullptr;
  pool_set::const_iterator pool_pos{};  ///< In the pool's set (blocks of sizes not binned).
  std::uint32_t bin_slot = 0;           ///< In its size bin's heap (size_bins.hpp).
  /// Overlaps an offloaded page range (engine_offload.cpp): allocated, pending free or
  /// offloaded_free, never split, merged or pooled until the range is restored or dropped.
  bool offloaded = false;

  bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
};

struct segment {
  device_address addr = 0;
  std::size_t bytes = 0;         ///< Reserved address range.
  std::size_t mapped_bytes = 0;  ///< Backed by memory (== bytes on devices without virtual reserve).
  std::size_t offloaded_bytes = 0;  ///< Of mapped_bytes, pages offloaded: host memory (not in reserved_bytes).
  pool_id pool = 0;
  stream_id stream = 0;
  bool expandable = false;       ///< Grows and shrinks by pages (expandable pools only).
  bool small = false;
  /// Ties between equal-size free blocks: the engine's count of segments made when this one was
  /// (pool_traits::segment_age_order), else 0. Every block of the segment carries it.
  std::uint64_t age_rank = 0;
  block* first = nullptr;

  device_address end() const noexcept { return addr + bytes; }
};

/// Whether `a` comes before `b` among free blocks of one stream and size: lower age rank, then
/// lower address.
inline bool ranks_before(const block* a, const block* b) noexcept {
  if (a->age_rank != b->age_rank) return a->age_rank < b->age_rank;
  return a->addr < b->addr;
}

inline bool block_order::operator()(const block* a, const block* b) const noexcept {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->bytes != b->bytes) return a->bytes < b->bytes;
  return ranks_before(a, b);
}
inline bool block_order::operator()(const block* a, const fit_key& k) const noexcept {
  if (a->stream != k.stream) return a->stream < k.stream;
  if (a->bytes != k.bytes) return a->bytes < k.bytes;
  if (a->age_rank != k.age_rank) return a->age_rank < k.age_rank;
  return a->addr < k.addr;
}
inline bool block_order::operator()(const fit_key& k, const block* b) const noexcept {
  if (k.stream != b->stream) return k.stream < b->stream;
  if (k.bytes != b->bytes) return k.bytes < b->bytes;
  if (k.age_rank != b->age_rank) return k.age_rank < b->age_rank;
  return k.addr < b->addr;
}

/// Recycles block objects so splitting does not call the system allocator on the hot path.
class block_arena {
 public:
  block* make() {
    if (!spare_.empty()) {
      block* b = spare_.back();
      spare_.pop_back();
      std::vector<stream_id> uses = std::move(b->stream_uses);  // empty (recycle cleared it); keeps its capacity
      *b = block{};
      b->stream_uses = std::move(uses);
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
