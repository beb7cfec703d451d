#include "phasealloc/oom_report.hpp"

#include <fmt/format.h>

namespace phasealloc {

std::string format_bytes(std::size_t bytes) {
  if (bytes < kib) return fmt::format("{} B", bytes);
  if (bytes < mib) return fmt::format("{:.2f} KiB", static_cast<double>(bytes) / kib);
  if (bytes < gib) return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / mib);
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / gib);
}

std::string format_oom_report(const oom_report& r) {
  std::string out = fmt::format(
      "phasealloc: out of memory. Tried to allocate {} (rounded to {}, pool '{}', phase '{}'; "
      "the device was asked for {}). Device capacity {}, of which {} free",
      format_bytes(r.requested_bytes), format_bytes(r.rounded_bytes), r.pool, r.phase, format_bytes(r.grow_bytes),
      format_bytes(r.capacity_bytes), format_bytes(r.device_free_bytes));
  if (r.limit_bytes != 0) out += fmt::format(", limit {}", format_bytes(r.limit_bytes));
  out += fmt::format(
      ". {} allocated, {} reserved, {} reserved but unallocated (largest free block {}).",
      format_bytes(r.allocated_bytes), format_bytes(r.reserved_bytes), format_bytes(r.reserved_unallocated_bytes()),
      format_bytes(r.largest_free_block_bytes));
  if (!r.device_failure.empty()) out += fmt::format("\nThe device said: {}", r.device_failure);
  if (!r.phases.empty()) {
    out += "\nPer phase (peak allocated / peak reserved / fragmentation):";
    for (const phase_stats& p : r.phases) {
      if (p.intervals == 0 && p.num_allocs == 0) continue;
      out += fmt::format("\n  {:<12} {:>12} / {:>12} / {:5.1f}%", p.name,
                         format_bytes(static_cast<std::size_t>(p.peak_allocated_bytes)),
                         format_bytes(static_cast<std::size_t>(p.peak_reserved_bytes)), 100.0 * p.fragmentation());
    }
  }
  if (r.reserved_unallocated_bytes() >= r.rounded_bytes) {
    out += "\nReserved-but-unallocated memory exceeds the request: it is fragmented. A phasealloc policy with "
           "transition release or page-granular release (docs/policies.md) avoids this.";
  }
  return out;
}

}  // namespace phasealloc
