// Exact-size bins: the free blocks of one pool and one stream whose size is a multiple of 512 B
// up to 2 MiB, one bin per size, each bin a min-heap on (age rank, address).
//
// Design note
// Rationale: a pool answers "the smallest free block of at least N bytes, lowest (age rank,
//   address) among equal sizes" (PyTorch's block order, block.hpp) on every allocation, and
//   inserts or erases a block on every split, merge and free. In a red-black tree each of those
//   is a search of log2(free blocks) levels with a three-field compare, a rebalance and a node
//   allocation: about 40% of a step of BM_Mixed. Small blocks (the small pool's, and
//   the remainders of large ones) are where most steps land, and their sizes come from a small set.
// Approach: 4096 bins, bin i for the blocks of exactly (i + 1) * 512 bytes. A two-level bitmap
//   (64 words of 64 bits, and a summary word saying which words are non-zero) finds the first
//   non-empty bin at or after a size in a few instructions. A bin is a binary min-heap on (age
//   rank, address) (block::bin_slot is a block's place in it), so the bin's first block in that
//   order is its first element, an insert or erase of any of its blocks is O(log k) in the k
//   blocks of that size, and k = 1, the usual case, costs a push or a pop. The order of the
//   answers is exactly the tree's: by size, then age rank, then address.
// Limitations: blocks of other sizes (not a multiple of 512 B, or above 2 MiB) are not binned;
//   block_pool keeps them in its ordered set. A bin cannot be walked in order past its
//   first two blocks (block_pool uses its set for pools whose best fit walks the order). 4096 heap
//   headers (96 KiB) per pool and stream that ever held a binned block.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "block.hpp"

namespace phasealloc::detail {

class size_bins {
 public:
  static constexpr std::size_t granule_bytes = 512;
  static constexpr std::size_t bin_count = 4096;
  static constexpr std::size_t max_bytes = granule_bytes * bin_count;  ///< 2 MiB: a small segment

  /// Whether a block of `bytes` lives in the bins (else in the pool's ordered set).
  static constexpr bool binned(std::size_t bytes) noexcept {
    return bytes != 0 && bytes <= max_bytes && bytes % granule_bytes == 0;
  }

  size_bins() : bins_(bin_count) {}

  void insert(block* b);
  void erase(block* b);
  /// Whether `b` is in these bins (for the invariant checker).
  bool contains(const block* b) const noexcept;

  /// The first block in (size, age rank, address) order of at least `bytes`, or nullptr; `skip`
  /// (may be nullptr) is passed over, so the answer is the one the bins would give without it.
  block* first_fit(std::size_t bytes, const block* skip = nullptr) const noexcept;
  /// The size of the largest binned block (0: none).
  std::size_t largest_bytes() const noexcept;
  bool empty() const noexcept { return summary_ == 0; }

  /// Every binned block, by size; only the non-empty bins are visited (the invariant checker and
  /// stats() walk the pools after every operation in tests).
  template <class F>
  void for_each(F&& f) const {
    for (std::uint64_t words = summary_; words != 0; words &= words - 1) {
      const std::size_t w = static_cast<std::size_t>(std::countr_zero(words));
      for (std::uint64_t bits = words_[w]; bits != 0; bits &= bits - 1) {
        for (const block* b : bins_[w * 64 + static_cast<std::size_t>(std::countr_zero(bits))]) f(b);
      }
    }
  }

 private:
  static std::size_t index_of(std::size_t bytes) noexcept { return bytes / granule_bytes - 1; }
  /// The first non-empty bin at or after `i` (bin_count: none).
  std::size_t next_non_empty(std::size_t i) const noexcept;
  void sift_up(std::vector<block*>& heap, std::size_t slot) noexcept;
  void sift_down(std::vector<block*>& heap, std::size_t slot) noexcept;
  void place(std::vector<block*>& heap, std::size_t slot, block* b) noexcept {
    heap[slot] = b;
    b->bin_slot = static_cast<std::uint32_t>(slot);
  }

  std::vector<std::vector<block*>> bins_;
  std::array<std::uint64_t, bin_count / 64> words_{};
  std::uint64_t summary_ = 0;  // bit w: words_[w] != 0
};

}  // namespace phasealloc::detail
