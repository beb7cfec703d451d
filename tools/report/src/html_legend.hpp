// Legends and colour keys shared by the charts and tables: small inline-SVG swatches, one entry
// per policy (with an out-of-memory badge), one per phase name.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/report/report.hpp"

namespace phasealloc::report_detail {

/// A short line sample, as drawn in the charts (an inline <svg>, no namespace needed in HTML).
std::string line_swatch(std::string_view colour, std::string_view dash, double stroke_width = 3);

/// A filled square sample with the given fill opacity.
std::string box_swatch(std::string_view colour, double opacity);

/// One legend entry: swatch then escaped label (and optional extra HTML, e.g. a badge).
std::string legend_item(const std::string& swatch, std::string_view label, const std::string& extra_html = {});

/// "3 OOMs" badge, empty when ooms == 0.
std::string oom_badge(std::int64_t ooms);

/// Each policy's line, in its colour, with its OOM badge.
std::string policy_legend_items(const report_input& input);

/// A coloured dot for table cells, then the escaped policy spec.
std::string policy_label(std::size_t index, std::string_view policy);

/// The header cell that opens a phase's group of table rows: its swatch and escaped name.
std::string phase_group_cell(std::string_view phase, std::size_t rows);

/// Phase names in first-seen order over all results' bands and phase stats.
std::vector<std::string> phase_names(const report_input& input);

}  // namespace phasealloc::report_detail
