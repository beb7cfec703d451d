#include "phasealloc/trace/trace_records.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

namespace phasealloc {
namespace {

/// Python's struct notation of one record: little-endian, no padding beyond the two 'x' bytes.
constexpr std::string_view record_layout = "<BBxxIQQQII";

template <typename T>
void put_le(std::string& out, std::size_t offset, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[offset + i] = static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
  }
}

void put_record(std::string& out, std::size_t at, const trace_event& e) {
  put_le(out, at + 0, static_cast<std::uint8_t>(e.op));
  put_le(out, at + 1, e.flags);
  put_le(out, at + 2, std::uint16_t{0});
  put_le(out, at + 4, e.stream);
  put_le(out, at + 8, e.time_ns);
  put_le(out, at + 16, e.alloc_id);
  put_le(out, at + 24, e.bytes);
  put_le(out, at + 32, e.tag);
  put_le(out, at + 36, e.name);
}

nlohmann::json header_of(const trace& t) {
  nlohmann::json ops = nlohmann::json::array();
  for (std::size_t op = 0; op < trace_event_op_count; ++op) {
    ops.push_back(std::string(to_string(static_cast<trace_event_op>(op))));
  }
  nlohmann::json properties = nlohmann::json::array();
  for (const trace_property& p : t.meta.properties) properties.push_back({p.key, p.value});
  return {{"format", std::string(trace_records_format)},
          {"version", trace_records_version},
          {"trace_version", t.version},
          {"events", t.events.size()},
          {"record_bytes", trace_records_record_bytes},
          {"record", std::string(record_layout)},
          {"fields", {"op", "flags", "stream", "time_ns", "alloc_id", "bytes", "tag", "name"}},
          {"ops", std::move(ops)},
          {"strings", t.strings},
          {"meta",
           {{"source", t.meta.source},
            {"allocator_settings", t.meta.allocator_settings},
            {"device_capacity_bytes", t.meta.device_capacity_bytes},
            {"stream_count", t.meta.stream_count},
            {"properties", std::move(properties)}}}};
}

/// The first string of `t` that JSON cannot carry (not valid UTF-8), as an error; else nothing.
std::optional<trace_error> invalid_string(const trace& t, std::string_view sink_name) {
  const auto check = [&](std::string_view what, const std::string& s) -> std::optional<trace_error> {
    try {
      (void)nlohmann::json(s).dump();
      return std::nullopt;
    } catch (const nlohmann::json::type_error&) {
      return trace_error{std::string(sink_name), 0, 0, fmt::format("{} to be valid UTF-8 (records carry it as JSON)", what),
                         "other bytes"};
    }
  };
  for (std::size_t i = 0; i < t.strings.size(); ++i) {
    if (auto e = check(fmt::format("string {}", i), t.strings[i])) return e;
  }
  if (auto e = check("the source", t.meta.source)) return e;
  if (auto e = check("the allocator settings", t.meta.allocator_settings)) return e;
  for (const trace_property& p : t.meta.properties) {
    if (auto e = check("a property key", p.key)) return e;
    if (auto e = check(fmt::format("the value of property \"{}\"", p.key), p.value)) return e;
  }
  return std::nullopt;
}

}  // namespace

result<std::monostate, trace_error> write_trace_records(const trace& t, std::ostream& out, std::string_view sink_name) {
  if (auto bad = invalid_string(t, sink_name)) return *bad;
  std::string bytes = header_of(t).dump();
  bytes.push_back('\n');
  const std::size_t body = bytes.size();
  bytes.resize(body + t.events.size() * trace_records_record_bytes);
  for (std::size_t i = 0; i < t.events.size(); ++i) put_record(bytes, body + i * trace_records_record_bytes, t.events[i]);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) {
    return trace_error{std::string(sink_name), 0, 0, fmt::format("to write {} bytes", bytes.size()), "a stream error"};
  }
  return std::monostate{};
}

}  // namespace phasealloc
