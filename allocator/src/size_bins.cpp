#include "size_bins.hpp"

#include "phasealloc/check.hpp"

namespace phasealloc::detail {

void size_bins::insert(block* b) {
  PHASEALLOC_ASSERT(binned(b->bytes), "block {:#x} of {} bytes is not binned", b->addr, b->bytes);
  const std::size_t i = index_of(b->bytes);
  std::vector<block*>& heap = bins_[i];
  heap.push_back(b);
  sift_up(heap, heap.size() - 1);
  words_[i / 64] |= std::uint64_t{1} << (i % 64);
  summary_ |= std::uint64_t{1} << (i / 64);
}

void size_bins::erase(block* b) {
  const std::size_t i = index_of(b->bytes);
  std::vector<block*>& heap = bins_[i];
  const std::size_t slot = b->bin_slot;
  PHASEALLOC_ASSERT(slot < heap.size() && heap[slot] == b, "block {:#x} is not in its bin", b->addr);
  block* last = heap.back();
  heap.pop_back();
  if (last != b) {
    // The last block takes the erased one's place, then moves up or down to where it belongs.
    place(heap, slot, last);
    if (slot > 0 && ranks_before(last, heap[(slot - 1) / 2])) {
      sift_up(heap, slot);
    } else {
      sift_down(heap, slot);
    }
  }
  if (heap.empty()) {
    words_[i / 64] &= ~(std::uint64_t{1} << (i % 64));
    if (words_[i / 64] == 0) summary_ &= ~(std::uint64_t{1} << (i / 64));
  }
}

bool size_bins::contains(const block* b) const noexcept {
  if (!binned(b->bytes)) return false;
  const std::vector<block*>& heap = bins_[index_of(b->bytes)];
  return b->bin_slot < heap.size() && heap[b->bin_slot] == b;
}

std::size_t size_bins::next_non_empty(std::size_t i) const noexcept {
  if (i >= bin_count) return bin_count;
  std::size_t w = i / 64;
  const std::uint64_t here = words_[w] & (~std::uint64_t{0} << (i % 64));
  if (here != 0) return w * 64 + static_cast<std::size_t>(std::countr_zero(here));
  const std::uint64_t later = w + 1 < 64 ? summary_ & (~std::uint64_t{0} << (w + 1)) : 0;
  if (later == 0) return bin_count;
  w = static_cast<std::size_t>(std::countr_zero(later));
  return w * 64 + static_cast<std::size_t>(std::countr_zero(words_[w]));
}

block* size_bins::first_fit(std::size_t bytes, const block* skip) const noexcept {
  if (bytes > max_bytes) return nullptr;
  std::size_t i = next_non_empty(bytes == 0 ? 0 : index_of(bytes + granule_bytes - 1));
  while (i < bin_count) {
    const std::vector<block*>& heap = bins_[i];
    if (heap[0] != skip) return heap[0];
    // The skipped block is this bin's first: the next is one of its children.
    if (heap.size() == 2) return heap[1];
    if (heap.size() > 2) return ranks_before(heap[1], heap[2]) ? heap[1] : heap[2];
    i = next_non_empty(i + 1);
  }
  return nullptr;
}

std::size_t size_bins::largest_bytes() const noexcept {
  if (summary_ == 0) return 0;
  const std::size_t w = 63 - static_cast<std::size_t>(std::countl_zero(summary_));
  const std::size_t i = w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(words_[w]));
  return (i + 1) * granule_bytes;
}

void size_bins::sift_up(std::vector<block*>& heap, std::size_t slot) noexcept {
  block* b = heap[slot];
  while (slot > 0) {
    const std::size_t parent = (slot - 1) / 2;
    if (!ranks_before(b, heap[parent])) break;
    place(heap, slot, heap[parent]);
    slot = parent;
  }
  place(heap, slot, b);
}

void size_bins::sift_down(std::vector<block*>& heap, std::size_t slot) noexcept {
  block* b = heap[slot];
  const std::size_t n = heap.size();
  while (true) {
    std::size_t child = 2 * slot + 1;
    if (child >= n) break;
    if (child + 1 < n && ranks_before(heap[child + 1], heap[child])) ++child;
    if (!ranks_before(heap[child], b)) break;
    place(heap, slot, heap[child]);
    slot = child;
  }
  place(heap, slot, b);
}

}  // namespace phasealloc::detail
