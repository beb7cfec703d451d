// The colocation headroom tables: per phase and policy, reserved while the phase runs (peak and
// time-weighted mean; what a colocated engine cannot use then), and per kind of transition what
// each policy returned to the device (mean per transition, largest, count).
#pragma once

#include <string>

#include "phasealloc/report/report.hpp"

namespace phasealloc::report_detail {

/// A paragraph instead of the tables when no result has phases.
std::string render_headroom_tables(const report_input& input);

}  // namespace phasealloc::report_detail
