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

class block_pool {
 public:
  /// Nodes come from the engine's pool resource: no system allocator call on the hot path.
  using set_type = pool_set;

  explicit block_pool(std::pmr::memory_resource* nodes) : blocks_(nodes) {}

  using iterator = set_type::iterator;

  void insert(block* b);
  void erase(block* b);
  /// Erases the block `it` names: no second search after best_fit_at found it.
  void erase(iterator it);
  bool contains(block* b) const { return blocks_.count(b) != 0 && b->pooled_in == this; }
  /// The smallest free block of at least `bytes` on `stream`, or nullptr. Counts one lookup.
  /// `accept(b)` may reject a candidate (oversize rules); the search then stops, as PyTorch's does.
  /// With `growable_size` (pool_traits::torch_expandable), a block of an expandable segment
  /// ranks by its size plus the unmapped pages after it, and the search walks on to the next
  /// larger block while that one ranks smaller.
  template <class Accept>
  block* best_fit(stream_id stream, std::size_t bytes, Accept&& accept, bool growable_size = false) {
    const iterator it = best_fit_at(stream, bytes, accept, growable_size);
    return it == blocks_.end() ? nullptr : *it;
  }
  /// best_fit, as a position (end() for none) that erase(iterator) takes.
  template <class Accept>
  iterator best_fit_at(stream_id stream, std::size_t bytes, Accept&& accept, bool growable_size = false);
  /// The first block of (stream, at least bytes) in the pool's order, without counting a lookup;
  /// end() or another stream's block when there is none.
  iterator lower_bound(stream_id stream, std::size_t bytes) const { return blocks_.lower_bound(fit_key{stream, bytes, 0}); }
  iterator end() const noexcept { return blocks_.end(); }
  /// Counts a lookup that did not search (the engine's deferred free answered it).
  void count_lookup() noexcept { ++lookups_; }
  std::uint64_t epoch() const noexcept { return epoch_; }
  /// Changes with every insert and erase: equal versions mean the same blocks in the same order.
  std::uint64_t version() const noexcept { return version_; }
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
  std::uint64_t version_ = 0;
};

template <class Accept>
block_pool::iterator block_pool::best_fit_at(stream_id stream, std::size_t bytes, Accept&& accept,
                                             bool growable_size) {
  ++lookups_;
  auto it = lower_bound(stream, bytes);
  if (it == blocks_.end() || (*it)->stream != stream) return blocks_.end();
  if (growable_size && (*it)->seg->expandable) {
    const auto ranked = [](const block* b) {
      return b->bytes + (b->next != nullptr && b->next->state == block_state::unmapped ? b->next->bytes : 0);
    };
    for (auto next = std::next(it); (*it)->seg->expandable && next != blocks_.end() &&
                                    (*next)->stream == stream && ranked(*next) < ranked(*it);
         ++next) {
      it = next;
    }
  }
  return accept(*it) ? it : blocks_.end();
}

}  // namespace phasealloc::detail
