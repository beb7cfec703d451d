// A map from 64-bit ids to small values in one flat array: what the trace passes (validation,
// summary) keep per live allocation.
//
// Design note
// Rationale: std::unordered_map allocates a node per id. A trace pass that inserts and erases
//   millions of ids spent more time in malloc, free and first-touch page faults of those nodes than
//   in its own checks (replay at 5 M events/s).
// Approach: open addressing with linear probing in a power-of-two table of slots (id, value, used),
//   Fibonacci hashing (the id times 2^64 / phi, top bits), so that consecutive ids spread over the
//   table and patterned ids (multiples of a power of two) do not collide. At most half the slots
//   are used; the table doubles beyond. Erase shifts the following entries of the probe run back
//   (no tombstones), so lookups stay short however many ids come and go.
// Limitations: pointers to values are invalidated by any insertion; no iteration order; values
//   are copied on growth, so keep them small and trivially copyable.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace phasealloc {

template <class V>
class flat_id_map {
 public:
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  /// The value of `id`, or nullptr.
  V* find(std::uint64_t id) noexcept {
    if (size_ == 0) return nullptr;
    for (std::size_t i = home(id);; i = (i + 1) & mask_) {
      slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.id == id) return &s.value;
    }
  }
  const V* find(std::uint64_t id) const noexcept { return const_cast<flat_id_map*>(this)->find(id); }
  bool contains(std::uint64_t id) const noexcept { return find(id) != nullptr; }

  /// Inserts `id` -> `value` unless `id` is present; the value of `id` and whether it was inserted.
  std::pair<V*, bool> try_emplace(std::uint64_t id, const V& value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    for (std::size_t i = home(id);; i = (i + 1) & mask_) {
      slot& s = slots_[i];
      if (!s.used) {
        s = slot{id, value, true};
        ++size_;
        return {&s.value, true};
      }
      if (s.id == id) return {&s.value, false};
    }
  }

  /// Removes `id`; whether it was present.
  bool erase(std::uint64_t id) noexcept {
    if (size_ == 0) return false;
    std::size_t hole = home(id);
    while (true) {
      if (!slots_[hole].used) return false;
      if (slots_[hole].id == id) break;
      hole = (hole + 1) & mask_;
    }
    // Backward shift: an entry after the hole moves into it unless its home lies cyclically in
    // (hole, its slot], where a lookup would no longer pass the hole to reach it.
    for (std::size_t next = (hole + 1) & mask_; slots_[next].used; next = (next + 1) & mask_) {
      const std::size_t h = home(slots_[next].id);
      const bool stays = hole <= next ? (hole < h && h <= next) : (hole < h || h <= next);
      if (stays) continue;
      slots_[hole] = slots_[next];
      hole = next;
    }
    slots_[hole].used = false;
    --size_;
    return true;
  }

  void clear() noexcept {
    for (slot& s : slots_) s.used = false;
    size_ = 0;
  }

  /// Room for `n` ids without growing.
  void reserve(std::size_t n) {
    if (2 * n > slots_.size()) rehash(std::bit_ceil(std::max<std::size_t>(2 * n, min_slots)));
  }

 private:
  struct slot {
    std::uint64_t id = 0;
    V value{};
    bool used = false;
  };
  static constexpr std::size_t min_slots = 16;

  std::size_t home(std::uint64_t id) const noexcept {
    return static_cast<std::size_t>((id * 0x9E3779B97F4A7C15ULL) >> shift_) & mask_;
  }
  void grow() { rehash(slots_.empty() ? min_slots : 2 * slots_.size()); }
  void rehash(std::size_t count) {
    std::vector<slot> old(count);
    old.swap(slots_);
    mask_ = count - 1;
    shift_ = 64 - std::countr_zero(count);
    size_ = 0;
    for (const slot& s : old) {
      if (s.used) try_emplace(s.id, s.value);
    }
  }

  std::vector<slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 63;
  std::size_t size_ = 0;
};

}  // namespace phasealloc
