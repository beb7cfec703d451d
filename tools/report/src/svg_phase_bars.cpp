#include "svg_phase_bars.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "axis_ticks.hpp"
#include "html_escape.hpp"
#include "html_legend.hpp"
#include "palette.hpp"
#include "phasealloc/oom_report.hpp"
#include "report_format.hpp"

namespace phasealloc::report_detail {
namespace {

constexpr double default_width = 1200;
constexpr double height = 360;
constexpr double margin_left = 86;
constexpr double margin_right = 16;
constexpr double margin_top = 40;
constexpr double margin_bottom = 48;
constexpr double plot_h = height - margin_top - margin_bottom;
constexpr double group_gap = 36;
constexpr double min_bar_w = 40;  // wide enough for a "100.0%" label
constexpr double max_bar_w = 72;

const phase_stats* find_phase(const replay_result& r, const std::string& name) {
  for (const phase_stats& p : r.phases) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> stat_phase_names(const report_input& input) {
  std::vector<std::string> names;
  for (const replay_result& r : input.results) {
    for (const phase_stats& p : r.phases) {
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
    }
  }
  return names;
}

/// Policies past the ten colours repeat one; their bars (and legend boxes) are striped.
constexpr std::string_view stripes_defs =
    R"(<defs><pattern id="bar-stripes" width="6" height="6" patternUnits="userSpaceOnUse" )"
    R"svg(patternTransform="rotate(45)"><rect width="2.5" height="6" fill="#ffffff" fill-opacity="0.6"/></pattern></defs>)svg";

bool striped(std::size_t policy_index) { return !policy_style(policy_index).dash.empty(); }

std::string bar_svg(double x, double w, double y_of_reserved, double y_of_allocated, double y_base,
                    std::size_t policy_index, const std::string& tooltip) {
  const std::string_view colour = policy_style(policy_index).colour;
  const std::string allocated_h = format_coord(std::max(0.0, y_base - y_of_allocated));
  std::string out = fmt::format(
      R"(<g class="bar"><title>{}</title>)"
      R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}" fill-opacity="0.28" stroke="{}" stroke-width="1"/>)"
      R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}" fill-opacity="0.9"/>)",
      tooltip, format_coord(x), format_coord(y_of_reserved), format_coord(w),
      format_coord(std::max(0.0, y_base - y_of_reserved)), colour, colour, format_coord(x), format_coord(y_of_allocated),
      format_coord(w), allocated_h, colour);
  if (striped(policy_index)) {
    out += fmt::format(R"svg(<rect x="{}" y="{}" width="{}" height="{}" fill="url(#bar-stripes)"/>)svg", format_coord(x),
                       format_coord(y_of_allocated), format_coord(w), allocated_h);
  }
  return out + "</g>";
}

std::string striped_box_swatch(std::string_view colour) {
  return fmt::format(
      R"(<svg class="swatch" width="14" height="14" viewBox="0 0 14 14" aria-hidden="true">)"
      R"(<rect x="0.5" y="0.5" width="13" height="13" rx="2" fill="{}" fill-opacity="0.9"/>)"
      R"svg(<rect x="0.5" y="0.5" width="13" height="13" rx="2" fill="url(#bar-stripes)"/></svg>)svg",
      colour);
}

}  // namespace

std::string render_phase_bars(const report_input& input) {
  const std::vector<std::string> phases = stat_phase_names(input);
  if (phases.empty() || (phases.size() == 1 && phases.front() == "unphased")) {
    return R"(<p class="empty">The trace has no phase events: see the results table for the whole run.</p>)";
  }
  const double n_groups = static_cast<double>(phases.size());
  const double n_policies = static_cast<double>(input.results.size());
  const double default_plot_w = default_width - margin_left - margin_right;
  const double slot_w = std::max(default_plot_w / n_groups, n_policies * min_bar_w + group_gap);
  const double bar_w = std::clamp((slot_w - group_gap) / n_policies, min_bar_w, max_bar_w);
  const double plot_w = slot_w * n_groups;
  const double width = margin_left + plot_w + margin_right;

  double max_reserved = 0;
  for (const replay_result& r : input.results) {
    for (const phase_stats& p : r.phases) max_reserved = std::max(max_reserved, static_cast<double>(p.peak_reserved_bytes));
  }
  const axis_scale ys = byte_axis(std::max(max_reserved, 1.0) * 1.05);
  const auto y = [&](double v) { return margin_top + plot_h * (1 - std::clamp(v / ys.top, 0.0, 1.0)); };
  const double y_base = y(0);

  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" id="phase-bars" class="chart-svg" viewBox="0 0 {} {}" )"
      R"({}role="img" aria-label="Peak reserved bytes per phase and policy">)",
      format_coord(width), format_coord(height),
      width > default_width ? fmt::format(R"(style="min-width:{}px" )", format_coord(width)) : std::string());
  svg += stripes_defs;
  svg += R"(<g class="grid">)";
  std::string ticks = R"(<g class="ticks">)";
  for (const axis_tick& t : ys.ticks) {
    svg += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}"/>)", format_coord(margin_left), format_coord(y(t.value)),
                       format_coord(margin_left + plot_w), format_coord(y(t.value)));
    ticks += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", format_coord(margin_left - 8),
                         format_coord(y(t.value) + 4), html_escape(t.label));
  }
  svg += "</g>";

  std::string labels;
  for (std::size_t g = 0; g < phases.size(); ++g) {
    const std::string& phase = phases[g];
    const double slot_x = margin_left + slot_w * static_cast<double>(g);
    const double bars_x = slot_x + (slot_w - bar_w * n_policies) / 2;
    const std::string_view phase_col = phase_colour(phase);
    svg += fmt::format(R"(<rect class="phase-strip" x="{}" y="{}" width="{}" height="4" fill="{}"/>)",
                       format_coord(bars_x), format_coord(y_base + 2), format_coord(bar_w * n_policies), phase_col);
    labels += fmt::format(R"(<text class="group-label" x="{}" y="{}" text-anchor="middle" fill="{}">{}</text>)",
                          format_coord(slot_x + slot_w / 2), format_coord(y_base + 24), phase_col, html_escape(phase));
    for (std::size_t i = 0; i < input.results.size(); ++i) {
      const replay_result& r = input.results[i];
      const phase_stats* p = find_phase(r, phase);
      const double x = bars_x + bar_w * static_cast<double>(i) + 3;
      const double cx = x + (bar_w - 6) / 2;
      if (p == nullptr) {
        labels += fmt::format(R"(<text class="bar-label muted" x="{}" y="{}" text-anchor="middle">n/a</text>)",
                              format_coord(cx), format_coord(y_base - 6));
        continue;
      }
      const auto reserved = static_cast<double>(p->peak_reserved_bytes);
      const auto allocated = static_cast<double>(std::min(p->peak_allocated_bytes, p->peak_reserved_bytes));
      const std::string tooltip = html_escape(fmt::format(
          "{} \u2014 {}\npeak reserved {}\npeak allocated {}\nfragmentation {}\nreserved \u2212 allocated at peak {}{}",
          r.policy, phase, format_bytes(static_cast<std::size_t>(p->peak_reserved_bytes)),
          format_bytes(static_cast<std::size_t>(p->peak_allocated_bytes)), format_percent(p->fragmentation()),
          format_bytes(static_cast<std::size_t>(std::max<std::int64_t>(0, p->reserved_unallocated_at_peak_bytes))),
          p->num_ooms > 0 ? fmt::format("\n{} out-of-memory failures", p->num_ooms) : std::string()));
      svg += bar_svg(x, bar_w - 6, y(reserved), y(allocated), y_base, i, tooltip);
      labels += fmt::format(R"(<text class="bar-label" x="{}" y="{}" text-anchor="middle">{}</text>)", format_coord(cx),
                            format_coord(y(reserved) - 6), format_percent(p->fragmentation()));
      if (p->num_ooms > 0) {
        labels += fmt::format(R"(<text class="bar-label oom" x="{}" y="{}" text-anchor="middle">{} OOM</text>)",
                              format_coord(cx), format_coord(y(reserved) - 20), format_count(p->num_ooms));
      }
    }
  }
  svg += fmt::format(R"(<path class="axis" d="M{},{} V{} H{}"/>)", format_coord(margin_left), format_coord(margin_top),
                     format_coord(y_base), format_coord(margin_left + plot_w));
  svg += ticks + "</g>" + labels + "</svg>";

  std::string legend;
  for (std::size_t i = 0; i < input.results.size(); ++i) {
    const std::string_view colour = policy_style(i).colour;
    legend += legend_item(striped(i) ? striped_box_swatch(colour) : box_swatch(colour, 0.9), input.results[i].policy,
                          oom_badge(input.results[i].ooms));
  }
  return fmt::format(
      R"(<figure class="chart"><ul class="legend">{}</ul><div class="scroll">{}</div>)"
      R"(<figcaption>Solid: peak allocated in the phase; pale: peak reserved in the phase (the pale part is )"
      R"(reserved but never allocated at once). Label: fragmentation = 1 )" "\u2212" R"( peak allocated / peak reserved.)"
      R"(</figcaption></figure>)",
      legend, svg);
}

}  // namespace phasealloc::report_detail
