// The pieces of a report page that the one-trace report (report.cpp) and the per-rank report
// (rank_report.cpp) share: the head (title, style), one trace's body, the footer, the file write.
#pragma once

#include <filesystem>
#include <string>
#include <variant>

#include "phasealloc/report/report.hpp"

namespace phasealloc::report_detail {

/// From <!DOCTYPE html> to the inline <style> (the caller closes </head>).
std::string page_head(const std::string& title);
/// The footer naming the command, and the closing of main, body and html.
std::string page_foot(const std::string& generated_by);
/// One trace's header (in `heading_tag`), summary, OOM warnings and sections.
std::string report_body(const report_input& input, const std::string& heading_tag);
/// Writes `page` to `path` (replacing it). The error names the path and what went wrong.
result<std::monostate, std::string> write_page(const std::filesystem::path& path, const std::string& page);

}  // namespace phasealloc::report_detail
