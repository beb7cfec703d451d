// Axis ticks that read well: bytes in one binary unit per axis (0, 0.5 GiB, 1 GiB, ...), time in
// 1-2-5 steps (200 ms, 400 ms, ...), event counts in 1-2-5 steps (20k, 40k, ...).
#pragma once

#include <string>
#include <vector>

namespace phasealloc::report_detail {

struct axis_tick {
  double value = 0;
  std::string label;
};

struct axis_scale {
  double top = 1;                ///< The axis ends here (a tick, at or above the data's maximum).
  std::vector<axis_tick> ticks;  ///< From 0 to top, inclusive.
};

/// Bytes: the unit is the one format_bytes would pick for `max_bytes` (B, KiB, MiB, GiB, TiB);
/// steps are 1/4, 1/2, 1, 2, 2.5, 5, 10, ... of it, at most `max_ticks` steps.
axis_scale byte_axis(double max_bytes, int max_ticks = 6);

/// Nanoseconds, labelled "0", "500 ms", "1 s", "1.5 s".
axis_scale duration_axis(double max_ns, int max_ticks = 8);

/// Event indices, labelled "0", "2,000", "40k", "1.2M".
axis_scale count_axis(double max_count, int max_ticks = 8);

}  // namespace phasealloc::report_detail
