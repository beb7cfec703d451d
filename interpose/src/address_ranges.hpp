// A set of disjoint address ranges: which addresses one engine holds memory for.
//
// Approach: start -> end in a std::map, merged on insert (touching ranges join), cut on erase, so
// lookups are one upper_bound. Not thread-safe: the owner locks.
#pragma once

#include <cstddef>
#include <map>

#include "phasealloc/types.hpp"

namespace phasealloc::interpose {

class address_ranges {
 public:
  /// Adds [addr, addr + bytes); overlapping and touching ranges merge.
  void insert(device_address addr, std::size_t bytes);
  /// Removes [addr, addr + bytes) wherever it overlaps; the rest stays.
  void erase(device_address addr, std::size_t bytes);
  bool contains(device_address addr) const noexcept;
  std::size_t range_count() const noexcept { return runs_.size(); }
  std::size_t total_bytes() const noexcept;

 private:
  std::map<device_address, device_address> runs_;  ///< start -> end (exclusive)
};

}  // namespace phasealloc::interpose
