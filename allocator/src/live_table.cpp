#include "live_table.hpp"

#include <utility>

#include "phasealloc/check.hpp"

namespace phasealloc::detail {

void live_table::emplace_slow(device_address addr, block* b) {
  PHASEALLOC_CHECK(addr != 0, "the live table cannot hold address 0");
  if (size_ >= max_size_) grow();
  emplace(addr, b);
}

void live_table::already_live(device_address addr) {
  report_fatal("address not yet live", __FILE__, __LINE__, fmt::format("address {:#x} is already live", addr));
}

void live_table::remove_at(std::size_t i) noexcept {
  // Backward shift: pull later entries of the run into the hole when their home allows it.
  for (std::size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    if (slots_[j].addr == 0) break;
    const std::size_t h = home(slots_[j].addr);
    // Entry j may move to i when i lies cyclically in [h, j).
    if (((j - h) & mask_) >= ((j - i) & mask_)) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = {};
  --size_;
}

void live_table::grow() {
  std::vector<slot> old = std::exchange(slots_, std::vector<slot>(slots_.size() * 2));
  --shift_;
  mask_ = slots_.size() - 1;
  max_size_ = slots_.size() / 2;
  for (const slot& s : old) {
    if (s.addr == 0) continue;
    std::size_t i = home(s.addr);
    while (slots_[i].addr != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

}  // namespace phasealloc::detail
