#include "cost_model.hpp"

#include <algorithm>

namespace phasealloc::detail::synth {

std::uint64_t cost_model::op_ns(double flops, double bytes) const noexcept {
  const double seconds = std::max(flops / flops_per_s, bytes / hbm_bytes_per_s);
  return op_overhead_ns + static_cast<std::uint64_t>(seconds * 1e9);
}

std::uint64_t cost_model::copy_ns(double bytes) const noexcept {
  return op_overhead_ns + static_cast<std::uint64_t>(bytes / pcie_bytes_per_s * 1e9);
}

}  // namespace phasealloc::detail::synth
