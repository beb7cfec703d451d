#include "request_rounding.hpp"

#include <array>
#include <atomic>
#include <bit>

#include <fmt/format.h>

#include "phasealloc/policies/pytorch_rounding.hpp"

namespace phasealloc::interpose {
namespace {

// One atomic per interval: an allocation racing with a change of settings sees either value of
// each, which is as good as PyTorch's own allocator, and the hot path loads one flag when off.
std::array<std::atomic<std::size_t>, pytorch_division_intervals> g_divisions{};
std::atomic<bool> g_enabled{false};

}  // namespace

std::string set_request_divisions(const std::size_t* divisions, std::size_t count) {
  if (count > pytorch_division_intervals) {
    return fmt::format("{} division intervals (PyTorch has {})", count, pytorch_division_intervals);
  }
  if (count > 0 && divisions == nullptr) return fmt::format("no table for {} intervals", count);
  pytorch_divisions table;
  for (std::size_t i = 0; i < count; ++i) {
    if (divisions[i] != 0 && !std::has_single_bit(divisions[i])) {
      return fmt::format("interval {}: {} divisions (0 or a power of two)", i, divisions[i]);
    }
    table.by_interval[i] = divisions[i];
  }
  g_enabled.store(false, std::memory_order_relaxed);
  for (std::size_t i = 0; i < table.by_interval.size(); ++i) {
    g_divisions[i].store(table.by_interval[i], std::memory_order_relaxed);
  }
  g_enabled.store(table.enabled(), std::memory_order_release);
  return {};
}

std::size_t min_block_bytes(std::size_t bytes) noexcept {
  if (!g_enabled.load(std::memory_order_acquire)) [[likely]] return 0;
  pytorch_divisions table;
  for (std::size_t i = 0; i < table.by_interval.size(); ++i) {
    table.by_interval[i] = g_divisions[i].load(std::memory_order_relaxed);
  }
  return pytorch_round_size(bytes, table);
}

}  // namespace phasealloc::interpose
