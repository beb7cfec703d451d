// range_allocator: lowest-fit or highest-fit over [0, bytes) with coalescing, for arena addresses
// and memfd offsets. Not thread-safe: the memory books' mutex guards it.
#pragma once

#include <cstddef>
#include <iterator>
#include <map>
#include <optional>

namespace simcuda::detail {

class range_allocator {
 public:
  explicit range_allocator(std::size_t bytes) {
    if (bytes > 0) free_[0] = bytes;
  }

  /// The lowest `alignment`-aligned offset with `bytes` free after it, taken.
  std::optional<std::size_t> take(std::size_t bytes, std::size_t alignment) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      std::size_t start = (it->first + alignment - 1) / alignment * alignment;
      std::size_t end = it->first + it->second;
      if (start < end && end - start >= bytes) {
        take_from(it, start, bytes);
        return start;
      }
    }
    return std::nullopt;
  }

  /// The highest `alignment`-aligned offset with `bytes` free after it, taken.
  std::optional<std::size_t> take_top(std::size_t bytes, std::size_t alignment) {
    for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
      const std::size_t run_end = it->first + it->second;
      if (run_end < bytes) continue;
      const std::size_t start = (run_end - bytes) / alignment * alignment;
      if (start >= it->first) {
        take_from(std::prev(it.base()), start, bytes);
        return start;
      }
    }
    return std::nullopt;
  }

  /// Takes exactly [offset, offset + bytes) if it is free.
  bool take_at(std::size_t offset, std::size_t bytes) {
    auto it = free_.upper_bound(offset);
    if (it == free_.begin()) return false;
    --it;
    if (offset + bytes > it->first + it->second) return false;
    take_from(it, offset, bytes);
    return true;
  }

  void give(std::size_t offset, std::size_t bytes) {
    auto next = free_.lower_bound(offset);
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        bytes += prev->second;
        free_.erase(prev);
      }
    }
    if (next != free_.end() && offset + bytes == next->first) {
      bytes += next->second;
      free_.erase(next);
    }
    free_[offset] = bytes;
  }

 private:
  void take_from(std::map<std::size_t, std::size_t>::iterator it, std::size_t start, std::size_t bytes) {
    std::size_t run_start = it->first;
    std::size_t run_end = it->first + it->second;
    free_.erase(it);
    if (start > run_start) free_[run_start] = start - run_start;
    if (start + bytes < run_end) free_[start + bytes] = run_end - (start + bytes);
  }

  std::map<std::size_t, std::size_t> free_;  ///< offset -> length, disjoint and not adjacent
};

}  // namespace simcuda::detail
