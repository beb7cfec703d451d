#include "axis_ticks.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "report_format.hpp"

namespace phasealloc::report_detail {
namespace {

/// Smallest 1-2-5 step with max / step <= max_ticks.
double nice_step(double max, int max_ticks) {
  const double raw = max / max_ticks;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (;; magnitude *= 10) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
    }
  }
}

template <class Label>
axis_scale make_scale(double max, double step, Label label) {
  axis_scale scale;
  const double steps = std::max(1.0, std::ceil(max / step - 1e-9));
  scale.top = steps * step;
  for (double i = 0; i <= steps; ++i) scale.ticks.push_back({i * step, label(i * step)});
  return scale;
}

}  // namespace

axis_scale byte_axis(double max_bytes, int max_ticks) {
  struct unit {
    double bytes;
    std::string_view name;
  };
  static constexpr std::array<unit, 5> units{{{1.0, "B"},
                                              {1024.0, "KiB"},
                                              {1024.0 * 1024, "MiB"},
                                              {1024.0 * 1024 * 1024, "GiB"},
                                              {1024.0 * 1024 * 1024 * 1024, "TiB"}}};
  if (!(max_bytes > 0)) max_bytes = 1;
  unit u = units[0];
  for (const unit& candidate : units) {
    if (max_bytes >= candidate.bytes) u = candidate;
  }
  const double in_unit = max_bytes / u.bytes;
  double step = 0;
  for (double scale = 1; step == 0; scale *= 10) {
    for (const double m : {0.25, 0.5, 1.0, 2.0, 2.5, 5.0}) {
      const double s = m * scale;
      if (u.bytes == 1 && s < 1) continue;  // no fractional bytes
      if (in_unit / s <= max_ticks) {
        step = s;
        break;
      }
    }
  }
  axis_scale scale = make_scale(in_unit, step, [&](double v) {
    return v == 0 ? std::string("0") : trim_decimals(fmt::format("{:.2f}", v)) + " " + std::string(u.name);
  });
  scale.top *= u.bytes;
  for (axis_tick& t : scale.ticks) t.value *= u.bytes;
  return scale;
}

axis_scale duration_axis(double max_ns, int max_ticks) {
  if (!(max_ns > 0)) max_ns = 1;
  return make_scale(max_ns, nice_step(max_ns, max_ticks), [](double ns) {
    if (ns == 0) return std::string("0");
    if (ns >= 1e9) return trim_decimals(fmt::format("{:.2f}", ns / 1e9)) + " s";
    if (ns >= 1e6) return trim_decimals(fmt::format("{:.2f}", ns / 1e6)) + " ms";
    if (ns >= 1e3) return trim_decimals(fmt::format("{:.2f}", ns / 1e3)) + " \u00b5s";
    return trim_decimals(fmt::format("{:.0f}", ns)) + " ns";
  });
}

axis_scale count_axis(double max_count, int max_ticks) {
  if (!(max_count > 0)) max_count = 1;
  const double step = std::max(1.0, nice_step(max_count, max_ticks));
  return make_scale(max_count, step, [](double n) {
    if (n < 10'000) return format_count(static_cast<std::int64_t>(n));
    if (n < 1e6) return trim_decimals(fmt::format("{:.1f}", n / 1e3)) + "k";
    if (n < 1e9) return trim_decimals(fmt::format("{:.2f}", n / 1e6)) + "M";
    return trim_decimals(fmt::format("{:.2f}", n / 1e9)) + "G";
  });
}

}  // namespace phasealloc::report_detail
