#include "text_table.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

namespace phasealloc::cli {

std::string text_table::render() const {
  std::vector<std::size_t> width;
  for (const auto& row : rows_) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    const auto& row = rows_[r];
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c == 0) out += fmt::format("{:<{}}", row[c], width[c]);
      else out += fmt::format("  {:>{}}", row[c], width[c]);
    }
    out += '\n';
    if (r == 0) {
      std::size_t total = 0;
      for (std::size_t c = 0; c < width.size(); ++c) total += width[c] + (c == 0 ? 0 : 2);
      out += std::string(total, '-') + '\n';
    }
  }
  return out;
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100.0 * fraction); }

std::string nanoseconds(std::uint64_t ns) {
  if (ns < 1'000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
  return fmt::format("{:.2f} s", static_cast<double>(ns) / 1e9);
}

}  // namespace phasealloc::cli
