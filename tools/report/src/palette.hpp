// Colours: one per policy (by position, the same in every chart and table) and one per phase
// name (generation, inference, training, optimizer fixed; other names hashed into a spare set).
#pragma once

#include <cstddef>
#include <string_view>

namespace phasealloc::report_detail {

struct line_style {
  std::string_view colour;  ///< "#rrggbb"
  std::string_view dash;    ///< stroke-dasharray, empty for solid.
};

/// Ten distinct colours; past ten they repeat with a dash pattern.
line_style policy_style(std::size_t index);

/// A mid-saturation colour, drawn pale for bands and full for labels.
std::string_view phase_colour(std::string_view phase_name);

}  // namespace phasealloc::report_detail
