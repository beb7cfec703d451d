#include "block_pool.hpp"

#include "phasealloc/check.hpp"

namespace phasealloc::detail {

void block_pool::insert(block* b) {
  PHASEALLOC_CHECK(b->pooled_in == nullptr, "block {:#x} (+{}) inserted into a pool while in one", b->addr, b->bytes);
  b->free_since = lookups_;
  b->free_epoch = epoch_;
  const auto [it, inserted] = blocks_.insert(b);
  PHASEALLOC_CHECK(inserted, "block {:#x} (+{}) inserted twice into its pool", b->addr, b->bytes);
  b->pooled_in = this;
  b->pool_pos = it;
  free_bytes_ += b->bytes;
  ++version_;
}

void block_pool::erase(block* b) {
  PHASEALLOC_CHECK(b->pooled_in == this, "block {:#x} (+{}) is not in its pool", b->addr, b->bytes);
  erase(b->pool_pos);
}

void block_pool::erase(iterator it) {
  block* b = *it;
  free_bytes_ -= b->bytes;
  blocks_.erase(it);
  b->pooled_in = nullptr;
  ++version_;
}

std::size_t block_pool::largest_bytes() const {
  // Ordered by stream first, so the largest of each stream is the last before the next stream.
  std::size_t largest = 0;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    const stream_id s = (*it)->stream;
    auto next_stream = (s == UINT64_MAX) ? blocks_.end() : blocks_.lower_bound(fit_key{s + 1, 0, 0});
    auto last = std::prev(next_stream);
    if ((*last)->bytes > largest) largest = (*last)->bytes;
    it = next_stream;
  }
  return largest;
}

}  // namespace phasealloc::detail
