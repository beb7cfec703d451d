// A pool's free blocks, ordered by (stream, size, address): the smallest block that fits on the
// request's stream is one lower_bound away, the lowest address among equal sizes wins (PyTorch's
// BlockComparatorSize, so replays of the `pytorch` policy choose the same blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory_resource>
#include <set>

#include "block.hpp"

namespace phasealloc::detail {

struct block_order {
  bool operator()(const block* a, const block* b) const noexcept {
    if (a->seg->stream != b->seg->stream) return a->seg->stream < b->seg->stream;
    if (a->bytes != b->bytes) return a->bytes < b->bytes;
    return a->addr < b->addr;
  }
};

class block_pool {
 public:
  /// Nodes come from the engine's pool resource: no system allocator call on the hot path.
  using set_type = std::pmr::set<block*, block_order>;

  explicit block_pool(std::pmr::memory_resource* nodes) : blocks_(nodes) {}

  void insert(block* b);
  void erase(block* b);
  bool contains(block* b) const { return blocks_.count(b) != 0; }
  /// The smallest free block of at least `bytes` on `stream`, or nullptr. Counts one lookup.
  /// `accept(b)` may reject a candidate (oversize rules); the search then stops, as PyTorch's does.
  /// With `growable_size` (pool_traits::torch_expandable), a block of an expandable segment
  /// ranks by its size plus the unmapped pages after it, and the search walks on to the next
  /// larger block while that one ranks smaller.
  template <class Accept>
  block* best_fit(stream_id stream, std::size_t bytes, Accept&& accept, bool growable_size = false);
  /// Largest free block in the pool (any stream).
  std::size_t largest_bytes() const;

  std::size_t size() const noexcept { return blocks_.size(); }
  std::size_t free_bytes() const noexcept { return free_bytes_; }
  std::uint64_t lookups() const noexcept { return lookups_; }
  /// Stamped on blocks as they are inserted (the engine's count of changes of phase).
  void set_epoch(std::uint64_t epoch) noexcept { epoch_ = epoch; }
  const set_type& blocks() const noexcept { return blocks_; }

 private:
  set_type blocks_;
  std::size_t free_bytes_ = 0;
  std::uint64_t lookups_ = 0;
  std::uint64_t epoch_ = 0;
};

template <class Accept>
block* block_pool::best_fit(stream_id stream, std::size_t bytes, Accept&& accept, bool growable_size) {
  ++lookups_;
  segment key_seg;
  key_seg.stream = stream;
  block key;
  key.seg = &key_seg;
  key.bytes = bytes;
  key.addr = 0;
  auto it = blocks_.lower_bound(&key);
  if (it == blocks_.end() || (*it)->seg->stream != stream) return nullptr;
  if (growable_size && (*it)->seg->expandable) {
    const auto ranked = [](const block* b) {
      return b->bytes + (b->next != nullptr && b->next->state == block_state::unmapped ? b->next->bytes : 0);
    };
    for (auto next = std::next(it); (*it)->seg->expandable && next != blocks_.end() &&
                                    (*next)->seg->stream == stream && ranked(*next) < ranked(*it);
         ++next) {
      it = next;
    }
  }
  return accept(*it) ? *it : nullptr;
}

}  // namespace phasealloc::detail
