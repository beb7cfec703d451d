#include "phasealloc/import/rmm_log_importer.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <optional>

#include "phasealloc/trace/file_bytes.hpp"
#include "import_builder.hpp"
#include "phasealloc/trace/trace_validate.hpp"

namespace phasealloc {
namespace {

constexpr std::uint64_t ns_per_second = 1'000'000'000ULL;
constexpr std::uint64_t ns_per_day = 86'400ULL * ns_per_second;
constexpr std::uint64_t max_seconds = 18'000'000'000ULL;  // keeps seconds * 1e9 inside 64 bits

std::string_view trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) {
    return {};
  }
  const std::size_t last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

template <class T>
bool parse_whole(std::string_view s, T& value, int base = 10) {
  if (s.empty()) {
    return false;
  }
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

bool parse_hex(std::string_view s, std::uint64_t& value) {
  if (s == "(nil)" || s == "nil" || s == "(null)") {
    value = 0;
    return true;
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
  }
  return parse_whole(s, value, 16);
}

// Nanoseconds of a fraction written after the '.', any number of digits (extra digits dropped).
bool parse_fraction_ns(std::string_view digits, std::uint64_t& ns) {
  ns = 0;
  if (digits.empty()) {
    return false;
  }
  std::uint64_t scale = ns_per_second;
  for (const char c : digits) {
    if (c < '0' || c > '9') {
      return false;
    }
    scale /= 10;
    ns += static_cast<std::uint64_t>(c - '0') * scale;
  }
  return true;
}

// "HH:MM:SS.ffffff" (time of day) or "seconds.fraction".
bool parse_time_ns(std::string_view s, std::uint64_t& ns) {
  const std::size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  std::uint64_t fraction = 0;
  if (dot != std::string_view::npos && !parse_fraction_ns(s.substr(dot + 1), fraction)) {
    return false;
  }
  std::uint64_t seconds = 0;
  if (whole.find(':') != std::string_view::npos) {
    if (whole.size() != 8 || whole[2] != ':' || whole[5] != ':') {
      return false;
    }
    unsigned h = 0;
    unsigned m = 0;
    unsigned sec = 0;
    if (!parse_whole(whole.substr(0, 2), h) || !parse_whole(whole.substr(3, 2), m) ||
        !parse_whole(whole.substr(6, 2), sec) || h > 23 || m > 59 || sec > 60) {
      return false;
    }
    seconds = h * 3600ULL + m * 60ULL + sec;
  } else if (!parse_whole(whole, seconds) || seconds > max_seconds) {
    return false;
  }
  ns = seconds * ns_per_second + fraction;
  return true;
}

}  // namespace

result<trace, trace_error> import_rmm_log(std::string_view csv_text, std::string_view source_name) {
  detail::import_builder builder{trace_metadata{}};
  std::uint64_t line_no = 0;
  std::size_t pos = 0;
  bool first_row = true;
  std::uint64_t rows = 0;
  std::uint64_t null_allocations = 0;
  std::uint64_t day_offset_ns = 0;
  std::optional<std::uint64_t> previous_ns;

  while (pos < csv_text.size()) {
    const std::size_t line_start = pos;
    const std::size_t eol = csv_text.find('\n', pos);
    const std::size_t end = eol == std::string_view::npos ? csv_text.size() : eol;
    const std::string_view line = trim(csv_text.substr(pos, end - pos));
    pos = end + (eol == std::string_view::npos ? 0 : 1);
    ++line_no;
    auto error = [&](std::string expected, std::string_view found) {
      return trace_error{std::string(source_name), line_start, line_no, std::move(expected),
                         fmt::format("'{}'", found.substr(0, 80))};
    };
    if (line.empty()) {
      continue;
    }
    std::array<std::string_view, 6> fields;
    std::size_t count = 0;
    std::size_t field_start = 0;
    while (true) {
      const std::size_t comma = line.find(',', field_start);
      if (count < fields.size()) {
        fields[count] = trim(line.substr(field_start, comma == std::string_view::npos ? comma : comma - field_start));
      }
      ++count;
      if (comma == std::string_view::npos) {
        break;
      }
      field_start = comma + 1;
    }
    if (first_row) {
      first_row = false;
      if (fields[0] == "Thread") {
        static constexpr std::array<std::string_view, 6> header = {"Thread", "Time", "Action",
                                                                   "Pointer", "Size", "Stream"};
        if (count != header.size() || fields != header) {
          return error("the header 'Thread,Time,Action,Pointer,Size,Stream'", line);
        }
        continue;
      }
    }
    if (count != fields.size()) {
      return error(fmt::format("6 comma-separated fields (Thread,Time,Action,Pointer,Size,Stream), found {}", count),
                   line);
    }
    std::uint64_t time_ns = 0;
    if (!parse_time_ns(fields[1], time_ns)) {
      return error("a Time like 14:21:19.998533 (or seconds.fraction)", fields[1]);
    }
    if (previous_ns && time_ns + day_offset_ns + ns_per_day / 2 < *previous_ns) {
      day_offset_ns += ns_per_day;  // midnight passed
    }
    time_ns += day_offset_ns;
    previous_ns = time_ns;

    std::uint64_t pointer = 0;
    if (!parse_hex(fields[3], pointer)) {
      return error("a hex Pointer like 0x7f8a40000000", fields[3]);
    }
    std::uint64_t size = 0;
    if (!parse_whole(fields[4], size)) {
      return error("a decimal Size", fields[4]);
    }
    if (size > trace_max_event_bytes) {
      return error(fmt::format("a Size of at most 1 PiB ({} bytes)", trace_max_event_bytes), fields[4]);
    }
    std::uint64_t stream = 0;
    if (!parse_hex(fields[5], stream)) {
      return error("a hex Stream like 55d0c8a1f2b0 or 0x0", fields[5]);
    }
    builder.set_time_ns(time_ns);
    const std::string_view action = fields[2];
    if (action == "allocate") {
      if (pointer == 0) {
        ++null_allocations;
      } else {
        builder.alloc(pointer, size, stream);
      }
    } else if (action == "allocate failure") {
      builder.oom(size, stream);
    } else if (action == "free" || action == "deallocate") {
      builder.free(pointer, size, stream);
    } else {
      return error("an Action of allocate, allocate failure or free", action);
    }
    ++rows;
  }
  trace t = builder.finish();
  t.meta.source = fmt::format("rmm log {}", source_name);
  set_property(t.meta, "rmm.rows", std::to_string(rows));
  set_property(t.meta, "rmm.null_allocations", std::to_string(null_allocations));
  return detail::valid_import(std::move(t), source_name);
}

result<trace, trace_error> import_rmm_log_file(const std::filesystem::path& path) {
  auto bytes = read_file_bytes(path);
  if (!bytes) {
    return bytes.error();
  }
  return import_rmm_log(bytes.value(), path.string());
}

}  // namespace phasealloc
