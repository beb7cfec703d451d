#include "address_ranges.hpp"

#include <algorithm>
#include <iterator>

namespace phasealloc::interpose {

void address_ranges::insert(device_address addr, std::size_t bytes) {
  if (bytes == 0) return;
  device_address lo = addr;
  device_address hi = addr + bytes;
  auto it = runs_.upper_bound(lo);
  if (it != runs_.begin() && std::prev(it)->second >= lo) --it;  // the run before touches or overlaps
  while (it != runs_.end() && it->first <= hi) {
    lo = std::min(lo, it->first);
    hi = std::max(hi, it->second);
    it = runs_.erase(it);
  }
  runs_.emplace(lo, hi);
}

void address_ranges::erase(device_address addr, std::size_t bytes) {
  if (bytes == 0) return;
  const device_address lo = addr;
  const device_address hi = addr + bytes;
  auto it = runs_.upper_bound(lo);
  if (it != runs_.begin() && std::prev(it)->second > lo) --it;
  while (it != runs_.end() && it->first < hi) {
    const device_address start = it->first;
    const device_address end = it->second;
    it = runs_.erase(it);
    if (start < lo) runs_.emplace(start, lo);
    if (end > hi) runs_.emplace(hi, end);
  }
}

bool address_ranges::contains(device_address addr) const noexcept {
  auto it = runs_.upper_bound(addr);
  if (it == runs_.begin()) return false;
  --it;
  return addr >= it->first && addr < it->second;
}

std::size_t address_ranges::total_bytes() const noexcept {
  std::size_t total = 0;
  for (const auto& [start, end] : runs_) total += end - start;
  return total;
}

}  // namespace phasealloc::interpose
