// The out-of-memory report: what PyTorch's OOM message says, plus where each phase stood.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "phasealloc/stats.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc {

struct oom_report {
  std::size_t requested_bytes = 0;
  std::size_t rounded_bytes = 0;
  std::size_t grow_bytes = 0;           ///< What the engine tried to add.
  std::size_t capacity_bytes = 0;
  std::size_t limit_bytes = 0;          ///< Memory-fraction limit (0 = none).
  std::size_t device_free_bytes = 0;
  std::size_t allocated_bytes = 0;
  std::size_t reserved_bytes = 0;
  std::size_t largest_free_block_bytes = 0;
  std::string device_failure;           ///< The device's last failed call, when it said.
  std::string pool;
  std::string phase;
  std::vector<phase_stats> phases;

  std::size_t reserved_unallocated_bytes() const noexcept { return reserved_bytes - allocated_bytes; }
};

/// "1.50 GiB", "512 B": PyTorch's format_size.
std::string format_bytes(std::size_t bytes);

/// The multi-line message users read (one place builds it).
std::string format_oom_report(const oom_report& report);

}  // namespace phasealloc
