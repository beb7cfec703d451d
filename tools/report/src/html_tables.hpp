// The two tables: results (one row per policy, whole run) and per phase (one row per phase and
// policy). Numbers are right-aligned; the lowest peak reserved among policies without OOMs is
// marked, and rows of policies with OOMs are flagged.
#pragma once

#include <string>

#include "phasealloc/report/report.hpp"

namespace phasealloc::report_detail {

std::string render_results_table(const report_input& input);

/// A paragraph instead of a table when no result has phase stats.
std::string render_phase_table(const report_input& input);

}  // namespace phasealloc::report_detail
