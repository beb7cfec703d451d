#include "html_legend.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "html_escape.hpp"
#include "palette.hpp"
#include "report_format.hpp"

namespace phasealloc::report_detail {

std::string line_swatch(std::string_view colour, std::string_view dash, double stroke_width) {
  return fmt::format(
      R"(<svg class="swatch" width="30" height="12" viewBox="0 0 30 12" aria-hidden="true">)"
      R"(<line x1="1" y1="6" x2="29" y2="6" stroke="{}" stroke-width="{}"{}/></svg>)",
      colour, format_coord(stroke_width), dash.empty() ? std::string() : fmt::format(R"( stroke-dasharray="{}")", dash));
}

std::string box_swatch(std::string_view colour, double opacity) {
  return fmt::format(
      R"(<svg class="swatch" width="14" height="14" viewBox="0 0 14 14" aria-hidden="true">)"
      R"(<rect x="0.5" y="0.5" width="13" height="13" rx="2" fill="{}" fill-opacity="{:.2f}" stroke="{}" )"
      R"(stroke-opacity="0.6"/></svg>)",
      colour, opacity, colour);
}

std::string legend_item(const std::string& swatch, std::string_view label, const std::string& extra_html) {
  return fmt::format(R"(<li>{}<span class="legend-label">{}</span>{}</li>)", swatch, html_escape(label), extra_html);
}

std::string oom_badge(std::int64_t ooms) {
  if (ooms <= 0) return {};
  return fmt::format(R"(<span class="badge oom">{} OOM{}</span>)", format_count(ooms), ooms == 1 ? "" : "s");
}

std::string policy_legend_items(const report_input& input) {
  std::string out;
  for (std::size_t i = 0; i < input.results.size(); ++i) {
    const line_style s = policy_style(i);
    out += legend_item(line_swatch(s.colour, s.dash), input.results[i].policy + " \u2014 reserved",
                       oom_badge(input.results[i].ooms));
  }
  return out;
}

std::string policy_label(std::size_t index, std::string_view policy) {
  // Long specs ("phasealloc:release=adaptive,max_split_size_mb=256") may break after : , = only.
  std::string text;
  for (const char c : policy) {
    text += html_escape(std::string_view(&c, 1));
    if (c == ':' || c == ',' || c == '=') text += "<wbr>";
  }
  return fmt::format(R"(<span class="dot" style="background:{}"></span><span class="policy">{}</span>)",
                     policy_style(index).colour, text);
}

std::vector<std::string> phase_names(const report_input& input) {
  std::vector<std::string> names;
  const auto add = [&](const std::string& name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const replay_result& r : input.results) {
    for (const phase_band& b : r.bands) add(b.name);
    for (const phase_stats& p : r.phases) add(p.name);
  }
  return names;
}

std::string phase_group_cell(std::string_view phase, std::size_t rows) {
  return fmt::format(R"(<th scope="rowgroup" rowspan="{}" class="phase-cell">{} {}</th>)", rows,
                     box_swatch(phase_colour(phase), 0.3), html_escape(phase));
}

}  // namespace phasealloc::report_detail
