#include "phasealloc/report/report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "html_escape.hpp"
#include "html_legend.hpp"
#include "html_tables.hpp"
#include "measures.hpp"
#include "page_style.hpp"
#include "phasealloc/oom_report.hpp"
#include "report_format.hpp"
#include "svg_phase_bars.hpp"
#include "svg_timeline.hpp"

namespace phasealloc {
namespace {

using namespace report_detail;

std::string summary_html(const report_input& input) {
  std::size_t events = 0;
  for (const replay_result& r : input.results) events = std::max(events, r.events);
  std::string out = fmt::format(
      R"(<p class="summary"><strong>{}</strong> events · <strong>{}</strong> polic{} · device capacity )"
      R"(<strong>{}</strong> · floor (peak live bytes) <strong>{}</strong></p>)",
      format_count(static_cast<std::int64_t>(events)), input.results.size(), input.results.size() == 1 ? "y" : "ies",
      input.capacity_bytes > 0 ? format_bytes(input.capacity_bytes) : std::string("unknown"),
      format_bytes(input.floor_bytes));

  if (const std::optional<std::size_t> best = lowest_peak_policy(input)) {
    const replay_result& b = input.results[*best];
    const replay_result& baseline = input.results.front();
    std::string versus;
    if (*best != 0 && baseline.peak_reserved_bytes > 0) {
      versus = "; " +
               format_percent(1 - static_cast<double>(b.peak_reserved_bytes) /
                                      static_cast<double>(baseline.peak_reserved_bytes)) +
               " below " + html_escape(baseline.policy);
    }
    out += fmt::format(
        R"(<p class="summary">Lowest peak reserved without OOMs: {} at <strong>{}</strong> ({} above the floor{}).</p>)",
        policy_label(*best, b.policy), format_bytes(b.peak_reserved_bytes),
        format_signed_bytes(static_cast<std::int64_t>(b.peak_reserved_bytes) - static_cast<std::int64_t>(input.floor_bytes)),
        versus);
  } else if (input.results.size() == 1 && input.results.front().ooms == 0) {
    const replay_result& r = input.results.front();
    out += fmt::format(R"(<p class="summary">Peak reserved: <strong>{}</strong> ({} above the floor).</p>)",
                       format_bytes(r.peak_reserved_bytes),
                       format_signed_bytes(static_cast<std::int64_t>(r.peak_reserved_bytes) -
                                           static_cast<std::int64_t>(input.floor_bytes)));
  }
  return out;
}

std::string oom_warning_html(const report_input& input) {
  std::string out;
  for (std::size_t i = 0; i < input.results.size(); ++i) {
    const replay_result& r = input.results[i];
    if (r.ooms <= 0) continue;
    out += fmt::format(
        R"(<p class="warn"><strong>Out of memory:</strong> {} failed {} allocation{} on a {} device; its peaks )"
        R"(leave those allocations out, so they understate what it needs.</p>)",
        policy_label(i, r.policy), format_count(r.ooms), r.ooms == 1 ? "" : "s",
        format_bytes(r.capacity_bytes > 0 ? r.capacity_bytes : input.capacity_bytes));
  }
  return out;
}

std::string section(std::string_view id, std::string_view title, const std::string& body) {
  return fmt::format(R"(<section id="{}"><h2>{}</h2>{}</section>)", id, title, body);
}

}  // namespace

std::string render_html_report(const report_input& input) {
  const std::string trace = input.trace_name.empty() ? std::string("(unnamed trace)") : input.trace_name;
  std::string page;
  page.reserve(256 * 1024);
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<meta name=\"generator\" content=\"phasealloc report\">\n";
  page += fmt::format("<title>phasealloc report \u2014 {}</title>\n", html_escape(trace));
  page += "<style>";
  page += page_style();
  page += "</style>\n</head>\n<body>\n<main>\n";

  page += fmt::format("<header><h1>Allocator policies on {}</h1>\n", html_escape(trace));
  page += summary_html(input) + oom_warning_html(input) + "</header>\n";

  page += section("memory", "Memory over time", render_timeline(input)) + "\n";
  page += section("phase-peaks", "Peak reserved per phase", render_phase_bars(input)) + "\n";
  page += section("results", "Results",
                  render_results_table(input) +
                      R"(<ul class="notes"><li>fragmentation = 1 )" "\u2212" R"( peak allocated / peak reserved; )"
                      R"(reserved )" "\u2212" R"( floor = peak reserved minus peak live bytes, which no allocator )"
                      R"(can go below.</li><li>Modelled device time is an estimate from a per-call cost model )"
                      R"((tens of microseconds per device call, per 2 MiB page mapped), not a measurement.</li>)"
                      R"(<li>Allocated counts rounded blocks; a policy with OOMs did not serve some requests.</li></ul>)") +
          "\n";
  page += section("phases", "Per phase", render_phase_table(input)) + "\n";

  page += "<footer>";
  if (!input.generated_by.empty()) {
    page += fmt::format("Generated by <code>{}</code>", html_escape(input.generated_by));
  } else {
    page += "Generated by phasealloc report";
  }
  page += "</footer>\n</main>\n</body>\n</html>\n";
  return page;
}

result<std::monostate, std::string> write_html_report(const std::filesystem::path& path, const report_input& input) {
  const std::string page = render_html_report(input);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fmt::format("cannot open {} for writing: {}", path.string(), std::strerror(errno));
  out.write(page.data(), static_cast<std::streamsize>(page.size()));
  out.close();
  if (!out) return fmt::format("cannot write {}: {}", path.string(), std::strerror(errno));
  return std::monostate{};
}

}  // namespace phasealloc
