#include "measures.hpp"

namespace phasealloc::report_detail {

std::optional<std::size_t> lowest_peak_policy(const report_input& input) {
  if (input.results.size() < 2) return std::nullopt;
  std::optional<std::size_t> best;
  std::size_t highest = 0;
  for (std::size_t i = 0; i < input.results.size(); ++i) {
    const replay_result& r = input.results[i];
    if (r.peak_reserved_bytes > highest) highest = r.peak_reserved_bytes;
    if (r.ooms > 0) continue;
    if (!best || r.peak_reserved_bytes < input.results[*best].peak_reserved_bytes) best = i;
  }
  if (best && input.results[*best].peak_reserved_bytes == highest) return std::nullopt;  // all equal
  return best;
}

}  // namespace phasealloc::report_detail
