#include "block_pool.hpp"

#include <algorithm>

#include "phasealloc/check.hpp"

namespace phasealloc::detail {
namespace {

/// The earlier of two blocks in (size, age rank, address) order; either may be nullptr.
block* earlier(block* a, block* b) noexcept {
  if (a == nullptr) return b;
  if (b == nullptr) return a;
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? a : b;
  return ranks_before(a, b) ? a : b;
}

}  // namespace

void block_pool::insert(block* b) {
  PHASEALLOC_CHECK(b->pooled_in == nullptr, "block {:#x} (+{}) inserted into a pool while in one", b->addr, b->bytes);
  b->free_since = lookups_;
  b->free_epoch = epoch_;
  if (in_bins(b)) {
    size_bins* bins = bins_of(b->stream);
    if (bins == nullptr) bins = bins_.emplace_back(stream_bins{b->stream, std::make_unique<size_bins>()}).bins.get();
    bins->insert(b);
  } else {
    const auto [it, inserted] = set_.insert(b);
    PHASEALLOC_CHECK(inserted, "block {:#x} (+{}) inserted twice into its pool", b->addr, b->bytes);
    b->pool_pos = it;
    if (b->bytes <= size_bins::max_bytes) ++set_binnable_sizes_;
  }
  b->pooled_in = this;
  ++size_;
  free_bytes_ += b->bytes;
  ++version_;
}

void block_pool::erase(block* b) {
  PHASEALLOC_CHECK(b->pooled_in == this, "block {:#x} (+{}) is not in its pool", b->addr, b->bytes);
  if (in_bins(b)) {
    bins_of(b->stream)->erase(b);
  } else {
    set_.erase(b->pool_pos);
    if (b->bytes <= size_bins::max_bytes) --set_binnable_sizes_;
  }
  b->pooled_in = nullptr;
  --size_;
  free_bytes_ -= b->bytes;
  ++version_;
}

bool block_pool::contains(const block* b) const {
  if (b->pooled_in != this) return false;
  if (!in_bins(b)) return set_.count(const_cast<block*>(b)) != 0;
  const size_bins* bins = bins_of(b->stream);
  return bins != nullptr && bins->contains(b);
}

block* block_pool::set_first_fit(stream_id stream, std::size_t bytes, const block* skip) const {
  if (set_.empty()) return nullptr;
  auto it = set_.lower_bound(fit_key{stream, bytes, 0, 0});
  if (it != set_.end() && *it == skip) ++it;
  return it != set_.end() && (*it)->stream == stream ? *it : nullptr;
}

block* block_pool::first_fit(stream_id stream, std::size_t bytes, const block* skip) const {
  const size_bins* bins = bytes <= size_bins::max_bytes ? bins_of(stream) : nullptr;
  block* from_bins = bins != nullptr ? bins->first_fit(bytes, skip) : nullptr;
  // The set's blocks are all larger than a binned one unless it holds sizes of at most 2 MiB.
  if (from_bins != nullptr && set_binnable_sizes_ == 0) return from_bins;
  return earlier(from_bins, set_first_fit(stream, bytes, skip));
}

std::size_t block_pool::largest_bytes() const {
  std::size_t largest = 0;
  for (const stream_bins& s : bins_) largest = std::max(largest, s.bins->largest_bytes());
  // Ordered by stream first, so the largest of each stream is the last before the next stream.
  for (auto it = set_.begin(); it != set_.end();) {
    const stream_id s = (*it)->stream;
    auto next_stream = (s == UINT64_MAX) ? set_.end() : set_.lower_bound(fit_key{s + 1, 0, 0, 0});
    largest = std::max(largest, (*std::prev(next_stream))->bytes);
    it = next_stream;
  }
  return largest;
}

}  // namespace phasealloc::detail
