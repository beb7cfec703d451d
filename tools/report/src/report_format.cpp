#include "report_format.hpp"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "phasealloc/oom_report.hpp"

namespace phasealloc::report_detail {

std::string format_count(std::int64_t value) {
  const std::string digits = fmt::format("{}", value < 0 ? -(value + 1) + 1ULL : static_cast<unsigned long long>(value));
  std::string out = value < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return "n/a";
  return fmt::format("{:.1f}%", 100.0 * fraction);
}

std::string format_duration_ns(std::uint64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns < 1'000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return fmt::format("{:.1f} \u00b5s", v / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.2f} ms", v / 1e6);
  return fmt::format("{:.2f} s", v / 1e9);
}

std::string format_signed_bytes(std::int64_t bytes) {
  if (bytes == 0) return "0 B";
  const auto magnitude = static_cast<std::size_t>(bytes < 0 ? -(bytes + 1) + 1ULL : static_cast<unsigned long long>(bytes));
  return (bytes < 0 ? "\u2212" : "+") + format_bytes(magnitude);
}

std::string format_coord(double value) {
  if (!std::isfinite(value)) return "0";
  std::string s = fmt::format("{:.1f}", value);
  if (s == "-0.0") s = "0.0";
  return s;
}

std::string trim_decimals(std::string number) {
  const std::size_t dot = number.find('.');
  if (dot == std::string::npos) return number;
  std::size_t end = number.size();
  while (end > dot + 1 && number[end - 1] == '0') --end;
  if (end == dot + 1) end = dot;
  number.erase(end);
  return number;
}

}  // namespace phasealloc::report_detail
