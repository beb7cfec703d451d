#include "phasealloc/import/kineto_importer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <unordered_set>
#include <vector>

#include "phasealloc/trace/file_bytes.hpp"
#include "import_builder.hpp"

namespace phasealloc {
namespace {

using json = nlohmann::json;

constexpr std::string_view memory_event = "[memory]";
constexpr std::string_view oom_event = "[OutOfMemory]";
constexpr std::int64_t cuda_device_type = 1;

bool is_kept_event(const json& event) {
  const auto name = event.find("name");
  if (name == event.end() || !name->is_string()) {
    return false;
  }
  const auto& text = name->get_ref<const std::string&>();
  return text == memory_event || text == oom_event;
}

// A number in args, written as a JSON number or a numeric string.
std::optional<std::int64_t> arg_int(const json& args, const char* key) {
  const auto it = args.find(key);
  if (it == args.end()) {
    return std::nullopt;
  }
  if (it->is_number_integer()) {
    return it->get<std::int64_t>();
  }
  if (it->is_number_unsigned()) {
    return static_cast<std::int64_t>(it->get<std::uint64_t>());
  }
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc{} && ptr == s.data() + s.size()) {
      return v;
    }
  }
  return std::nullopt;
}

struct memory_record {
  std::size_t index = 0;  // among memory events, for errors
  double ts_us = 0;
  bool oom = false;
  std::uint64_t addr = 0;
  std::int64_t bytes = 0;
  std::optional<std::int64_t> total_allocated;
  std::optional<std::int64_t> total_reserved;
};

/// The device with the most memory events (the lowest id among equals).
std::int64_t busiest_device(const std::map<std::int64_t, std::vector<memory_record>>& by_device) {
  std::int64_t best = 0;
  std::size_t best_count = 0;
  for (const auto& [id, records] : by_device) {
    if (records.size() > best_count) {
      best = id;
      best_count = records.size();
    }
  }
  return best;
}

/// Bytes the recording frees without having allocated them (the allocations the builder seeds).
std::uint64_t seeded_by_frees(const std::vector<memory_record>& records) {
  std::unordered_set<std::uint64_t> live;
  std::uint64_t bytes = 0;
  for (const memory_record& r : records) {
    if (r.oom || r.bytes == 0) continue;
    if (r.bytes > 0) {
      live.insert(r.addr);
    } else if (live.erase(r.addr) == 0) {
      bytes += static_cast<std::uint64_t>(-r.bytes);
    }
  }
  return bytes;
}

}  // namespace

result<trace, trace_error> import_kineto(std::string_view json_text, std::string_view source_name,
                                         const kineto_import_options& options) {
  auto error = [&](std::uint64_t offset, std::string expected, std::string found) {
    return trace_error{std::string(source_name), offset, 0, std::move(expected), std::move(found)};
  };
  json doc;
  try {
    // Drop every event that is not a memory event as soon as it is parsed (keeps memory small).
    json::parser_callback_t keep = [](int /*depth*/, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::object_end && parsed.is_object() && parsed.contains("ph")) {
        return is_kept_event(parsed);
      }
      return true;
    };
    doc = json::parse(json_text.begin(), json_text.end(), keep, /*allow_exceptions=*/true);
  } catch (const json::parse_error& e) {
    return error(e.byte > 0 ? e.byte - 1 : 0, "valid JSON (a Chrome trace)", e.what());
  } catch (const std::exception& e) {
    return error(0, "valid JSON (a Chrome trace)", e.what());
  }

  const json* events = nullptr;
  if (doc.is_object()) {
    const auto it = doc.find("traceEvents");
    if (it == doc.end() || !it->is_array()) {
      return error(0, "a Chrome trace object with a 'traceEvents' array", "an object without one");
    }
    events = &*it;
  } else if (doc.is_array()) {
    events = &doc;
  } else {
    return error(0, "a Chrome trace (an object with 'traceEvents', or an array of events)", doc.type_name());
  }

  std::map<std::int64_t, std::vector<memory_record>> by_device;  // CUDA device id -> its events
  std::size_t index = 0;
  for (const json& event : *events) {
    if (!event.is_object() || !is_kept_event(event)) {
      continue;
    }
    const std::size_t k = index++;
    auto bad = [&](std::string_view what) {
      return error(0, fmt::format("memory event {}: {}", k, what), event.dump().substr(0, 200));
    };
    const auto args_it = event.find("args");
    if (args_it == event.end() || !args_it->is_object()) {
      return bad("an 'args' object");
    }
    const json& args = *args_it;
    const auto type = arg_int(args, "Device Type");
    const auto id = arg_int(args, "Device Id");
    if (!type || !id) {
      return bad("integer 'Device Type' and 'Device Id' args");
    }
    if (*type != cuda_device_type) {
      continue;
    }
    const auto ts = event.find("ts");
    if (ts == event.end() || !ts->is_number() || !(ts->get<double>() >= 0.0) || ts->get<double>() > 1.8e16) {
      return bad("a non-negative number 'ts' (microseconds)");
    }
    memory_record r;
    r.index = k;
    r.ts_us = ts->get<double>();
    r.oom = event["name"].get_ref<const std::string&>() == oom_event;
    const auto bytes = arg_int(args, "Bytes");
    if (!bytes || *bytes == INT64_MIN) {
      return bad("an integer 'Bytes' arg");
    }
    if (r.oom && *bytes < 0) {
      return bad(fmt::format("a non-negative 'Bytes' (the size that did not fit), not {}", *bytes));
    }
    r.bytes = *bytes;
    if (!r.oom) {
      const auto addr = arg_int(args, "Addr");
      if (!addr) {
        return bad("an integer 'Addr' arg");
      }
      r.addr = static_cast<std::uint64_t>(*addr);
    }
    for (const char* key : {"Total Allocated", "Total Reserved"}) {
      const auto total = arg_int(args, key);
      if (args.contains(key) && !total) {
        return bad(fmt::format("an integer '{}' arg", key));
      }
      if (total && *total < 0) {
        return bad(fmt::format("a non-negative '{}' (a byte count), not {}", key, *total));
      }
      (std::string_view(key) == "Total Allocated" ? r.total_allocated : r.total_reserved) = total;
    }
    by_device[*id].push_back(r);
  }
  const std::int64_t device = options.device_id.value_or(busiest_device(by_device));
  std::vector<memory_record> records = std::move(by_device[device]);
  std::stable_sort(records.begin(), records.end(),
                   [](const memory_record& a, const memory_record& b) { return a.ts_us < b.ts_us; });

  detail::import_builder builder{trace_metadata{}};
  // The baseline: bytes live before the first event (its Total Allocated less its own change) that
  // no free in the recording accounts for are one seeded allocation, live throughout.
  std::uint64_t baseline_bytes = 0;
  std::uint64_t unattributed_bytes = 0;
  if (!records.empty() && records.front().total_allocated) {
    const memory_record& first = records.front();
    const std::int64_t before = *first.total_allocated - (first.oom ? 0 : first.bytes);
    baseline_bytes = before > 0 ? static_cast<std::uint64_t>(before) : 0;
    const std::uint64_t seeded = seeded_by_frees(records);
    unattributed_bytes = baseline_bytes > seeded ? baseline_bytes - seeded : 0;
    if (unattributed_bytes > 0) {
      builder.seed_alloc(unattributed_bytes, 0);
    }
  }
  // Reserved as recorded: Total Reserved of the first event is a seeded segment, each later change a
  // segment_map (growth) or segment_unmap (release) just before the event that reports it.
  std::optional<std::int64_t> reserved;
  std::int64_t peak_allocated = 0;
  std::int64_t peak_reserved = 0;
  std::uint64_t reserved_at_start = 0;
  std::uint64_t zero_sized = 0;
  for (const memory_record& r : records) {
    builder.set_time_ns(static_cast<std::uint64_t>(std::llround(r.ts_us * 1000.0)));
    peak_allocated = std::max(peak_allocated, r.total_allocated.value_or(0));
    if (r.total_reserved) {
      peak_reserved = std::max(peak_reserved, *r.total_reserved);
      if (!reserved) {
        reserved_at_start = static_cast<std::uint64_t>(*r.total_reserved);
        if (reserved_at_start > 0) {
          builder.seed_segment(reserved_at_start, 0);
        }
      } else if (*r.total_reserved > *reserved) {
        builder.segment_map(static_cast<std::uint64_t>(*r.total_reserved - *reserved), 0);
      } else if (*r.total_reserved < *reserved) {
        builder.segment_unmap(static_cast<std::uint64_t>(*reserved - *r.total_reserved), 0);
      }
      reserved = r.total_reserved;
    }
    const std::uint64_t magnitude = r.bytes < 0 ? static_cast<std::uint64_t>(-r.bytes) : static_cast<std::uint64_t>(r.bytes);
    if (r.oom) {
      builder.oom(magnitude, 0);
    } else if (r.bytes > 0) {
      builder.alloc(r.addr, magnitude, 0);
    } else if (r.bytes < 0) {
      builder.free(r.addr, magnitude, 0);
    } else {
      ++zero_sized;
    }
  }
  trace t = builder.finish();
  t.meta.source = fmt::format("pytorch profiler trace {}", source_name);
  if (doc.is_object()) {
    const auto props = doc.find("deviceProperties");
    if (props != doc.end() && props->is_array()) {
      for (const json& p : *props) {
        if (p.is_object() && arg_int(p, "id") == device) {
          t.meta.device_capacity_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(
              arg_int(p, "totalGlobalMem").value_or(0), 0));
        }
      }
    }
  }
  std::string devices;
  for (const auto& [id, list] : by_device) {
    if (!list.empty() || id == device) {
      devices += fmt::format("{}{}:{}", devices.empty() ? "" : ",", id, id == device ? records.size() : list.size());
    }
  }
  set_property(t.meta, "kineto.device_id", std::to_string(device));
  set_property(t.meta, "kineto.device_choice", options.device_id ? "asked for" : "the most memory events");
  set_property(t.meta, "kineto.devices", devices);
  set_property(t.meta, "kineto.baseline_bytes", std::to_string(baseline_bytes));
  set_property(t.meta, "kineto.baseline_unattributed_bytes", std::to_string(unattributed_bytes));
  if (reserved) {
    set_property(t.meta, "recorded.source", "kineto Total Reserved");
    set_property(t.meta, "recorded.reserved_at_start_bytes", std::to_string(reserved_at_start));
    set_property(t.meta, "recorded.peak_reserved_bytes", std::to_string(peak_reserved));
    set_property(t.meta, "recorded.reserved_at_end_bytes", std::to_string(*reserved));
  }
  set_property(t.meta, "kineto.memory_events", std::to_string(records.size()));
  set_property(t.meta, "kineto.zero_sized_events", std::to_string(zero_sized));
  set_property(t.meta, "kineto.peak_total_allocated_bytes", std::to_string(peak_allocated));
  set_property(t.meta, "kineto.peak_total_reserved_bytes", std::to_string(peak_reserved));
  return detail::valid_import(std::move(t), source_name);
}

result<trace, trace_error> import_kineto_file(const std::filesystem::path& path, const kineto_import_options& options) {
  auto bytes = read_file_bytes(path);
  if (!bytes) {
    return bytes.error();
  }
  return import_kineto(bytes.value(), path.string(), options);
}

}  // namespace phasealloc
