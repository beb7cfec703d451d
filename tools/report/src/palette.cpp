#include "palette.hpp"

#include <array>
#include <cstdint>

namespace phasealloc::report_detail {

line_style policy_style(std::size_t index) {
  static constexpr std::array<std::string_view, 10> colours{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                                            "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  static constexpr std::array<std::string_view, 3> dashes{"", "8 4", "2 3"};
  return {colours[index % colours.size()], dashes[(index / colours.size()) % dashes.size()]};
}

std::string_view phase_colour(std::string_view phase_name) {
  if (phase_name == "generation") return "#2e8b57";
  if (phase_name == "inference") return "#d98200";
  if (phase_name == "training") return "#3b6fb6";
  if (phase_name == "optimizer") return "#8e4fa8";
  if (phase_name == "unphased") return "#8a8a8a";
  static constexpr std::array<std::string_view, 6> spare{"#c0504d", "#1b9e9e", "#b8860b",
                                                         "#d45087", "#6b8e23", "#5f6caf"};
  std::uint32_t hash = 2166136261u;  // FNV-1a: the same name gets the same colour in every report
  for (const char c : phase_name) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  return spare[hash % spare.size()];
}

}  // namespace phasealloc::report_detail
