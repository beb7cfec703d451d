// A pool's free blocks in the order (stream, size, age rank, address): the smallest block that
// fits on the request's stream, among equal sizes the lowest age rank, then address (PyTorch's
// block order, block.hpp; so replays of the `pytorch` policy choose the same blocks).
//
// Design note
// Rationale: best fit runs on every allocation and the pool changes on every split, merge and
//   free; a red-black tree over every free block made that about 40% of a mixed-size step
//  .
// Approach: two indexes with one order. Blocks of a size that is a multiple of 512 B up to 2 MiB
//   (the small pool's, and most remainders) go to exact-size bins per stream (size_bins.hpp: a
//   bitmap finds the first non-empty bin, a bin is a min-heap on (age rank, address)); the others
//   stay in an ordered set. The sizes of the two are disjoint, so best fit is the smaller, by
//   (size, age rank, address), of the two first fits. A block knows where it is (bin_slot, or pool_pos in the set): erasing
//   it needs no search.
// Limitations: a pool whose best fit walks the order past the first fit (`growable_size`:
//   growth_style::expandable_segments) keeps every block in the set (ordered_only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <set>
#include <vector>

#include "block.hpp"
#include "phasealloc/check.hpp"
#include "size_bins.hpp"

namespace phasealloc::detail {

class block_pool {
 public:
  /// Set nodes come from the engine's pool resource: no system allocator call on the hot path.
  /// `ordered_only`: every block in the set (a pool whose best fit walks the order).
  block_pool(std::pmr::memory_resource* nodes, bool ordered_only) : set_(nodes), ordered_only_(ordered_only) {}

  void insert(block* b);
  void erase(block* b);
  bool contains(const block* b) const;
  /// The smallest free block of at least `bytes` on `stream`, or nullptr. Counts one lookup.
  /// `accept(b)` may reject the candidate (oversize rules); the search then stops, as PyTorch's does.
  /// With `growable_size` (growth_style::expandable_segments, an ordered_only pool), a block of an
  /// expandable segment ranks by its size plus the unmapped pages after it, and the search walks
  /// on to the next larger block while that one ranks smaller.
  template <class Accept>
  block* best_fit(stream_id stream, std::size_t bytes, Accept&& accept, bool growable_size = false);
  /// The first block of (stream, at least bytes) in the pool's order, passing over `skip` (may be
  /// nullptr), without counting a lookup; nullptr when there is none on that stream.
  block* first_fit(stream_id stream, std::size_t bytes, const block* skip = nullptr) const;
  /// The lowest-address free block of at least `bytes` on `stream` that `accept(b)` takes, or
  /// nullptr (placement::lowest_address). Counts one lookup; walks every free block of the pool.
  template <class Accept>
  block* lowest_fit(stream_id stream, std::size_t bytes, Accept&& accept) {
    ++lookups_;
    const block* lowest = nullptr;
    for_each([&](const block* b) {
      if (b->stream == stream && b->bytes >= bytes && (lowest == nullptr || b->addr < lowest->addr) && accept(b)) {
        lowest = b;
      }
    });
    return const_cast<block*>(lowest);  // the pool holds the engine's (mutable) blocks; for_each lends them const
  }
  /// Counts a lookup that did not search (the engine's deferred free answered it).
  void count_lookup() noexcept { ++lookups_; }
  std::uint64_t epoch() const noexcept { return epoch_; }
  /// Changes with every insert and erase: equal versions mean the same blocks in the same order.
  std::uint64_t version() const noexcept { return version_; }
  /// Largest free block in the pool (any stream).
  std::size_t largest_bytes() const;

  std::size_t size() const noexcept { return size_; }
  std::size_t free_bytes() const noexcept { return free_bytes_; }
  std::uint64_t lookups() const noexcept { return lookups_; }
  /// Stamped on blocks as they are inserted (the engine's count of changes of phase).
  void set_epoch(std::uint64_t epoch) noexcept { epoch_ = epoch; }
  /// Every block, in no particular order.
  template <class F>
  void for_each(F&& f) const {
    for (const block* b : set_) f(b);
    for (const stream_bins& s : bins_) s.bins->for_each(f);
  }

 private:
  struct stream_bins {
    stream_id stream = 0;
    std::unique_ptr<size_bins> bins;
  };
  bool in_bins(const block* b) const noexcept { return !ordered_only_ && size_bins::binned(b->bytes); }
  size_bins* bins_of(stream_id stream) const noexcept {
    for (const stream_bins& s : bins_) {
      if (s.stream == stream) return s.bins.get();
    }
    return nullptr;
  }
  /// first_fit in the set only.
  block* set_first_fit(stream_id stream, std::size_t bytes, const block* skip) const;

  pool_set set_;
  std::size_t set_binnable_sizes_ = 0;  // set blocks of at most size_bins::max_bytes (sizes not a multiple of 512 B)
  std::vector<stream_bins> bins_;  // one per stream that ever had a binned block; few
  bool ordered_only_;
  std::size_t size_ = 0;
  std::size_t free_bytes_ = 0;
  std::uint64_t lookups_ = 0;
  std::uint64_t epoch_ = 0;
  std::uint64_t version_ = 0;
};

template <class Accept>
block* block_pool::best_fit(stream_id stream, std::size_t bytes, Accept&& accept, bool growable_size) {
  ++lookups_;
  if (!growable_size) {
    block* b = first_fit(stream, bytes);
    return b != nullptr && accept(b) ? b : nullptr;
  }
  PHASEALLOC_ASSERT(ordered_only_, "a growable-size best fit in a pool with bins");
  auto it = set_.lower_bound(fit_key{stream, bytes, 0, 0});
  if (it == set_.end() || (*it)->stream != stream) return nullptr;
  if ((*it)->seg->expandable) {
    const auto ranked = [](const block* b) {
      return b->bytes + (b->next != nullptr && b->next->state == block_state::unmapped ? b->next->bytes : 0);
    };
    for (auto next = std::next(it); (*it)->seg->expandable && next != set_.end() && (*next)->stream == stream &&
                                    ranked(*next) < ranked(*it);
         ++next) {
      it = next;
    }
  }
  return accept(*it) ? *it : nullptr;
}

}  // namespace phasealloc::detail
