// Text formatting of numbers for the report (bytes themselves go through format_bytes).
#pragma once

#include <cstdint>
#include <string>

namespace phasealloc::report_detail {

/// "1,234,567".
std::string format_count(std::int64_t value);

/// 0.1234 -> "12.3%".
std::string format_percent(double fraction);

/// "850 ns", "12.5 µs", "3.20 ms", "1.25 s".
std::string format_duration_ns(std::uint64_t ns);

/// format_bytes with a sign: "+1.50 GiB", "−512.00 MiB" (a true minus sign), "0 B".
std::string format_signed_bytes(std::int64_t bytes);

/// A coordinate for SVG attributes: one decimal, no exponent.
std::string format_coord(double value);

/// "2.50" -> "2.5", "3.00" -> "3": for axis labels.
std::string trim_decimals(std::string number);

}  // namespace phasealloc::report_detail
