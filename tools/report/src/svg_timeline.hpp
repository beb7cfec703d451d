// The "memory over time" figure: reserved bytes per policy, allocated bytes, the floor (peak live
// bytes), the device capacity when it is in range, phases as shaded bands; byte and time axes.
#pragma once

#include <string>

#include "phasealloc/report/report.hpp"

namespace phasealloc::report_detail {

/// About this many points are drawn per line; longer timelines are thinned by maximum.
inline constexpr std::size_t timeline_max_points = 2000;

/// A <figure> with its legend and SVG, or a paragraph saying why there is nothing to draw.
std::string render_timeline(const report_input& input);

}  // namespace phasealloc::report_detail
