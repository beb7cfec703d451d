// Peak reserved per phase, grouped by phase, one bar per policy: the pale part of a bar is
// reserved, the solid part allocated, the label fragmentation (1 - peak allocated / peak reserved).
#pragma once

#include <string>

#include "phasealloc/report/report.hpp"

namespace phasealloc::report_detail {

/// A <figure> with the grouped bar chart, or a paragraph when the trace has no phases.
std::string render_phase_bars(const report_input& input);

}  // namespace phasealloc::report_detail
