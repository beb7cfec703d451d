#include "svg_timeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

constexpr double width = 1200;
constexpr double height = 460;
constexpr double margin_left = 86;
constexpr double margin_right = 24;
constexpr double margin_top = 14;
constexpr double margin_bottom = 50;
constexpr double plot_w = width - margin_left - margin_right;
constexpr double plot_h = height - margin_top - margin_bottom;

struct sample {
  double x = 0;
  double allocated = 0;
  double reserved = 0;
};

/// Time on the x axis when the trace has timestamps, else the event index.
bool has_time(const report_input& input) {
  for (const replay_result& r : input.results) {
    for (const timeline_point& p : r.timeline) {
      if (p.time_ns > 0) return true;
    }
  }
  return false;
}

/// The replay's samples, thinned to about timeline_max_points by taking maxima (peaks survive).
std::vector<sample> thin(const std::vector<timeline_point>& points, bool time_axis) {
  std::vector<sample> out;
  if (points.empty()) return out;
  const std::size_t per_bucket = (points.size() + timeline_max_points - 1) / timeline_max_points;
  out.reserve(points.size() / per_bucket + 1);
  for (std::size_t i = 0; i < points.size(); i += per_bucket) {
    sample s;
    for (std::size_t j = i; j < std::min(points.size(), i + per_bucket); ++j) {
      const timeline_point& p = points[j];
      s.x = static_cast<double>(time_axis ? p.time_ns : p.event);
      s.allocated = std::max(s.allocated, static_cast<double>(p.allocated_bytes));
      s.reserved = std::max(s.reserved, static_cast<double>(p.reserved_bytes));
    }
    out.push_back(s);
  }
  return out;
}

struct frame {
  double x_max = 1;
  double y_top = 1;
  double x(double v) const { return margin_left + plot_w * std::clamp(v / x_max, 0.0, 1.0); }
  double y(double v) const { return margin_top + plot_h * (1 - std::clamp(v / y_top, 0.0, 1.0)); }
};

std::string polyline(const frame& f, const std::vector<sample>& samples, bool reserved) {
  std::string points;
  for (const sample& s : samples) {
    if (!points.empty()) points += ' ';
    points += format_coord(f.x(s.x)) + "," + format_coord(f.y(reserved ? s.reserved : s.allocated));
  }
  return points;
}

std::string area_path(const frame& f, const std::vector<sample>& samples) {
  if (samples.empty()) return {};
  const std::string base = format_coord(f.y(0));
  // Appended, not "M" + ...: GCC 12 at -O3 warns falsely on a literal + a temporary string (-Wrestrict).
  std::string d = "M";
  d += format_coord(f.x(samples.front().x)) + "," + base;
  for (const sample& s : samples) d += " L" + format_coord(f.x(s.x)) + "," + format_coord(f.y(s.allocated));
  d += " L" + format_coord(f.x(samples.back().x)) + "," + base + " Z";
  return d;
}

/// Rough width of a label in the chart's 12px system font (no layout engine here).
double label_width(std::string_view text) { return 7.0 * static_cast<double>(text.size()); }

std::string bands_svg(const frame& f, const std::vector<phase_band>& bands, bool time_axis, std::string& labels) {
  std::string out = R"(<g class="bands">)";
  double last_end_px = -1;
  for (const phase_band& b : bands) {
    const double from = static_cast<double>(time_axis ? b.start_ns : b.first_event);
    const double to = static_cast<double>(time_axis ? b.end_ns : b.end_event);
    const double x0 = f.x(from);
    const double x1 = f.x(to);
    if (x1 - x0 < 0.3 && x1 - last_end_px < 0.3) continue;  // thousands of iterations: skip sub-pixel slivers
    last_end_px = x1;
    const std::string_view colour = phase_colour(b.name);
    const std::string span = time_axis ? format_duration_ns(b.start_ns) + " \u2013 " + format_duration_ns(b.end_ns)
                                       : "events " + format_count(static_cast<std::int64_t>(b.first_event)) +
                                             " \u2013 " + format_count(static_cast<std::int64_t>(b.end_event));
    out += fmt::format(
        R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}" fill-opacity="0.13"><title>{} ({})</title></rect>)",
        format_coord(x0), format_coord(margin_top), format_coord(std::max(x1 - x0, 0.3)), format_coord(plot_h),
        colour, html_escape(b.name), span);
    if (x1 - x0 >= label_width(b.name) + 10) {
      labels += fmt::format(R"(<text class="band-label halo" x="{}" y="{}" fill="{}">{}</text>)", format_coord(x0 + 5),
                            format_coord(margin_top + 15), colour, html_escape(b.name));
    }
  }
  return out + "</g>";
}

std::string hline(const frame& f, double value, std::string_view colour, std::string_view dash,
                  const std::string& label, std::string_view css_class) {
  const double y = f.y(value);
  return fmt::format(
      R"(<g class="{}"><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="1.5" stroke-dasharray="{}"/>)"
      R"(<text class="halo" x="{}" y="{}" text-anchor="end" fill="{}">{}</text></g>)",
      css_class, format_coord(margin_left), format_coord(y), format_coord(margin_left + plot_w), format_coord(y),
      colour, dash, format_coord(margin_left + plot_w - 6), format_coord(y - 6), colour, html_escape(label));
}

std::string axes_svg(const frame& f, const axis_scale& ys, const axis_scale& xs, bool time_axis) {
  std::string grid = R"(<g class="grid">)";
  std::string text = R"(<g class="ticks">)";
  for (const axis_tick& t : ys.ticks) {
    const double y = f.y(t.value);
    grid += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}"/>)", format_coord(margin_left), format_coord(y),
                        format_coord(margin_left + plot_w), format_coord(y));
    text += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", format_coord(margin_left - 8),
                        format_coord(y + 4), html_escape(t.label));
  }
  for (const axis_tick& t : xs.ticks) {
    const double x = f.x(t.value);
    text += fmt::format(R"(<line class="tick" x1="{}" y1="{}" x2="{}" y2="{}"/>)", format_coord(x),
                        format_coord(margin_top + plot_h), format_coord(x), format_coord(margin_top + plot_h + 5));
    text += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", format_coord(x),
                        format_coord(margin_top + plot_h + 19), html_escape(t.label));
  }
  text += fmt::format(R"(<text class="axis-title" x="{}" y="{}" text-anchor="middle">{}</text>)",
                      format_coord(margin_left + plot_w / 2), format_coord(height - 8),
                      time_axis ? "time since the start of the trace" : "event index");
  const std::string frame_lines = fmt::format(
      R"(<path class="axis" d="M{},{} V{} H{}"/>)", format_coord(margin_left), format_coord(margin_top),
      format_coord(margin_top + plot_h), format_coord(margin_left + plot_w));
  return grid + "</g>" + frame_lines + text + "</g>";
}

/// A policy whose allocated line is not the first policy's (failed allocations, other rounding).
bool allocated_differs(const replay_result& r, const replay_result& first) {
  const double a = static_cast<double>(r.peak_allocated_bytes);
  const double b = static_cast<double>(first.peak_allocated_bytes);
  return r.ooms != first.ooms || std::abs(a - b) > 0.01 * std::max(a, b);
}

}  // namespace

std::string render_timeline(const report_input& input) {
  bool any_samples = false;
  std::size_t events = 0;
  for (const replay_result& r : input.results) {
    any_samples = any_samples || !r.timeline.empty();
    events = std::max(events, r.events);
  }
  if (input.results.empty()) return R"(<p class="empty">No policy was replayed: nothing to draw.</p>)";
  if (events == 0) return R"(<p class="empty">The trace has no events: nothing to draw.</p>)";
  if (!any_samples) {
    return R"(<p class="empty">The replay kept no timeline samples (replay with timeline points &gt; 0 to get )"
           R"(this chart).</p>)";
  }

  const bool time_axis = has_time(input);
  std::vector<std::vector<sample>> series;
  double x_max = 0;
  double y_max = static_cast<double>(input.floor_bytes);
  for (const replay_result& r : input.results) {
    series.push_back(thin(r.timeline, time_axis));
    for (const sample& s : series.back()) {
      x_max = std::max(x_max, s.x);
      y_max = std::max({y_max, s.allocated, s.reserved});
    }
    for (const phase_band& b : r.bands) x_max = std::max(x_max, static_cast<double>(time_axis ? b.end_ns : b.end_event));
  }
  const double capacity = static_cast<double>(input.capacity_bytes);
  const bool show_capacity = capacity > 0 && capacity <= y_max * 1.25;
  if (show_capacity) y_max = std::max(y_max, capacity);

  const axis_scale ys = byte_axis(y_max * 1.06);
  const axis_scale xs = time_axis ? duration_axis(x_max) : count_axis(x_max);
  frame f;
  f.x_max = x_max > 0 ? x_max : 1;
  f.y_top = ys.top;
  // Ticks past the data's end would squeeze the chart: end the x axis at the data, drop later ticks.
  axis_scale x_ticks = xs;
  std::erase_if(x_ticks.ticks, [&](const axis_tick& t) { return t.value > f.x_max * 1.001; });

  const std::vector<phase_band>* bands = nullptr;
  for (const replay_result& r : input.results) {
    if (std::any_of(r.bands.begin(), r.bands.end(), [](const phase_band& b) { return b.name != "unphased"; })) {
      bands = &r.bands;
      break;
    }
  }

  std::string band_labels;
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" id="timeline" class="chart-svg" viewBox="0 0 {} {}" )"
      R"(role="img" aria-label="Reserved and allocated bytes over time, per policy">)",
      format_coord(width), format_coord(height));
  if (bands != nullptr) svg += bands_svg(f, *bands, time_axis, band_labels);
  svg += axes_svg(f, ys, x_ticks, time_axis);

  std::string legend = policy_legend_items(input);
  const replay_result& first = input.results.front();
  svg += fmt::format(R"(<path class="allocated-area" d="{}"><title>allocated ({})</title></path>)",
                     area_path(f, series.front()), html_escape(first.policy));
  legend += legend_item(box_swatch("#6b7785", 0.35), input.results.size() > 1 ? "allocated (" + first.policy + ")"
                                                                              : std::string("allocated"));
  for (std::size_t i = 0; i < input.results.size(); ++i) {
    const line_style s = policy_style(i);
    svg += fmt::format(
        R"(<polyline class="reserved" points="{}" stroke="{}"{}><title>{} reserved (peak {})</title></polyline>)",
        polyline(f, series[i], true), s.colour,
        s.dash.empty() ? std::string() : fmt::format(R"( stroke-dasharray="{}")", s.dash),
        html_escape(input.results[i].policy), format_bytes(input.results[i].peak_reserved_bytes));
    if (i > 0 && allocated_differs(input.results[i], first)) {
      svg += fmt::format(R"(<polyline class="allocated-line" points="{}" stroke="{}"><title>{} allocated</title></polyline>)",
                         polyline(f, series[i], false), s.colour, html_escape(input.results[i].policy));
      legend += legend_item(line_swatch(s.colour, "4 3", 1.5), "allocated (" + input.results[i].policy + ")");
    }
  }
  // Peak markers: where each policy's reserved line is highest.
  for (std::size_t i = 0; i < input.results.size(); ++i) {
    const auto peak = std::max_element(series[i].begin(), series[i].end(),
                                       [](const sample& a, const sample& b) { return a.reserved < b.reserved; });
    if (peak == series[i].end()) continue;
    svg += fmt::format(R"(<circle class="peak" cx="{}" cy="{}" r="4" fill="{}"><title>{}: peak reserved {}</title></circle>)",
                       format_coord(f.x(peak->x)), format_coord(f.y(peak->reserved)), policy_style(i).colour,
                       html_escape(input.results[i].policy), format_bytes(input.results[i].peak_reserved_bytes));
  }
  if (input.floor_bytes > 0) {
    svg += hline(f, static_cast<double>(input.floor_bytes), "#222222", "6 4",
                 "floor (peak live) " + format_bytes(input.floor_bytes), "floor");
    legend += legend_item(line_swatch("#222222", "6 4", 1.5), "floor: peak live bytes");
  }
  if (show_capacity) {
    svg += hline(f, capacity, "#b91c1c", "2 3", "capacity " + format_bytes(input.capacity_bytes), "capacity");
    legend += legend_item(line_swatch("#b91c1c", "2 3", 1.5), "device capacity");
  }
  svg += band_labels + "</svg>";

  std::string phases;
  if (bands != nullptr) {
    for (const std::string& name : phase_names(input)) phases += legend_item(box_swatch(phase_colour(name), 0.3), name);
    phases = R"(<ul class="legend phases"><li class="legend-title">phases</li>)" + phases + "</ul>";
  }
  return fmt::format(
      R"(<figure class="chart"><ul class="legend">{}</ul><div class="scroll">{}</div>{})"
      R"(<figcaption>Each line is the maximum over the events it stands for ({} samples per policy at most); )"
      R"(dots mark each policy's peak reserved. Hover a line, band or dot for details.</figcaption></figure>)",
      legend, svg, phases, format_count(static_cast<std::int64_t>(timeline_max_points)));
}

}  // namespace phasealloc::report_detail
