// The live table: address -> allocated block, for every free and record_stream to find its block.
//
// Design note
// Rationale: each allocate/free pair inserts and removes one entry, on the hot path under the
//   engine's lock. A node-based hash map (std::unordered_map, even with recycled nodes) costs a
//   node, a bucket walk and a modulo per operation (~7% of a pair's instructions).
// Approach: open addressing with linear probing in a power-of-two array of (address, block)
//   slots, Fibonacci hashing of the address (blocks are 512-byte aligned, so the low bits say
//   nothing), at most half full (doubled when it would pass that), and backward-shift deletion (no
//   tombstones, so probes stay short however long the run). Address 0 marks an empty slot; no
//   device hands out address 0, and insert checks it.
// Limitations: never shrinks (the peak number of live blocks stays allocated: 16 bytes each,
//   twice over). Not thread-safe: the engine's lock guards it.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "phasealloc/types.hpp"

namespace phasealloc::detail {

struct block;

class live_table {
 public:
  live_table() : slots_(min_capacity) {}

  /// Adds addr -> b; the address must not be in the table (checked).
  void emplace(device_address addr, block* b) {
    if (addr == 0 || size_ >= max_size_) [[unlikely]] return emplace_slow(addr, b);
    std::size_t i = home(addr);
    for (; slots_[i].addr != 0; i = (i + 1) & mask_) {
      if (slots_[i].addr == addr) [[unlikely]] already_live(addr);
    }
    slots_[i] = {addr, b};
    ++size_;
  }
  /// The block at addr, or nullptr.
  block* find(device_address addr) const noexcept {
    for (std::size_t i = home(addr);; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.addr == addr) return s.b;
      if (s.addr == 0) return nullptr;
    }
  }
  /// Removes addr and returns its block (nullptr when absent).
  block* erase(device_address addr) noexcept {
    std::size_t i = home(addr);
    while (slots_[i].addr != addr) {
      if (slots_[i].addr == 0) return nullptr;
      i = (i + 1) & mask_;
    }
    block* const found = slots_[i].b;
    const std::size_t next = (i + 1) & mask_;
    if (slots_[next].addr == 0) [[likely]] {  // the end of its run: nothing to shift back
      slots_[i] = {};
      --size_;
    } else {
      remove_at(i);
    }
    return found;
  }
  std::size_t size() const noexcept { return size_; }
  /// Calls f(block*) for every entry, in table order (not address order).
  template <class F>
  void for_each(F&& f) const {
    for (const slot& s : slots_) {
      if (s.addr != 0) f(s.b);
    }
  }

 private:
  struct slot {
    device_address addr = 0;
    block* b = nullptr;
  };
  static constexpr std::size_t min_capacity = 64;

  std::size_t home(device_address addr) const noexcept {
    return static_cast<std::size_t>((addr * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void grow();
  void emplace_slow(device_address addr, block* b);
  [[noreturn]] static void already_live(device_address addr);
  /// Empties slot i and shifts the rest of its run back (no tombstones).
  void remove_at(std::size_t i) noexcept;

  std::vector<slot> slots_;
  std::size_t mask_ = min_capacity - 1;
  std::size_t size_ = 0;
  std::size_t max_size_ = min_capacity / 2;  ///< Entries before the table doubles (half full).
  unsigned shift_ = 64 - std::countr_zero(min_capacity);
};

}  // namespace phasealloc::detail
