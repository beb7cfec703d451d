// The control API: configuration, phases, stats, snapshots, traces and errors.
//
// Every function catches everything; failures return -1 (or NULL) and set the last error
// (c_api_support.hpp). Strings are returned from one thread-local buffer per function.
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "c_api_support.hpp"
#include "engine_registry.hpp"
#include "fork_guard.hpp"
#include "event_listener.hpp"
#include "interpose_config.hpp"
#include "last_error.hpp"
#include "phasealloc_c_api.h"
#include "snapshot_json.hpp"
#include "stats_json.hpp"

namespace phasealloc::interpose {
namespace {

std::string nonempty_name(const char* name) {
  if (name == nullptr) throw api_error("phase name is NULL");
  return name;
}

}  // namespace
}  // namespace phasealloc::interpose

using namespace phasealloc;
using namespace phasealloc::interpose;

extern "C" {

PHASEALLOC_API int phasealloc_configure(const char* conf) {
  return as_status("phasealloc_configure", [&] { return configure_process(conf != nullptr ? conf : ""); });
}

PHASEALLOC_API const char* phasealloc_config(void) {
  thread_local std::string buffer;
  return as_string("phasealloc_config", buffer, [] {
    const auto& config = process_config();
    if (!config) throw api_error(config.error());
    return format_interpose_config(config.value());
  });
}

PHASEALLOC_API int phasealloc_phase_begin(const char* name) {
  if (in_forked_child()) return 0;  // no release in a forked child (fork_guard.hpp)
  return as_status("phasealloc_phase_begin", [&] { return engine_registry::instance().begin_phase(nonempty_name(name)); });
}

PHASEALLOC_API int phasealloc_phase_end(void) {
  if (in_forked_child()) return 0;  // no release in a forked child (fork_guard.hpp)
  return as_status("phasealloc_phase_end", [] { return engine_registry::instance().end_phase(); });
}

PHASEALLOC_API int phasealloc_phase_set(const char* name) {
  if (in_forked_child()) return 0;  // no release in a forked child (fork_guard.hpp)
  return as_status("phasealloc_phase_set", [&] { return engine_registry::instance().set_phase(nonempty_name(name)); });
}

PHASEALLOC_API const char* phasealloc_current_phase(void) {
  thread_local std::string buffer;
  return as_string("phasealloc_current_phase", buffer, [] { return engine_registry::instance().current_phase(); });
}

PHASEALLOC_API const char* phasealloc_stats_json(int device) {
  thread_local std::string buffer;
  return as_string("phasealloc_stats_json", buffer, [&] {
    if (const std::string bad = check_device(device, true); !bad.empty()) throw api_error(bad);
    engine_registry& registry = engine_registry::instance();
    if (device != -1) return stats_to_json(registry.existing(device), device, registry.misuse_count(), registry.device_count()).dump();
    nlohmann::json devices = nlohmann::json::object();
    for (device_slot* s : registry.created()) {
      devices[std::to_string(s->ordinal)] = stats_to_json(s, s->ordinal, registry.misuse_count(), registry.device_count());
    }
    return nlohmann::json{{"devices", std::move(devices)}}.dump();
  });
}

PHASEALLOC_API int phasealloc_reset_peak_stats(int device) {
  return as_status("phasealloc_reset_peak_stats", [&] {
    std::string bad = check_device(device, true);
    if (bad.empty()) {
      for (device_slot* s : slots_for(device)) {
        s->eng->reset_peak_stats();
        if (host_pool* pool = s->host.existing()) pool->reset_peak_stats();
      }
    }
    return bad;
  });
}

PHASEALLOC_API int phasealloc_reset_accumulated_stats(int device) {
  return as_status("phasealloc_reset_accumulated_stats", [&] {
    std::string bad = check_device(device, true);
    if (bad.empty()) {
      for (device_slot* s : slots_for(device)) {
        s->eng->reset_accumulated_stats();
        if (host_pool* pool = s->host.existing()) pool->reset_accumulated_stats();
      }
    }
    return bad;
  });
}

PHASEALLOC_API const char* phasealloc_snapshot_json(int device) {
  thread_local std::string buffer;
  return as_string("phasealloc_snapshot_json", buffer, [&] {
    if (const std::string bad = check_device(device, true); !bad.empty()) throw api_error(bad);
    nlohmann::json segments = nlohmann::json::array();
    for (device_slot* s : slots_for(device)) append_snapshot_segments(s->eng->take_snapshot(), s->ordinal, segments);
    return segments.dump();
  });
}

PHASEALLOC_API int phasealloc_trace_start(const char* path_pattern) {
  return as_status("phasealloc_trace_start", [&] {
    return engine_registry::instance().start_trace(path_pattern != nullptr ? path_pattern : "");
  });
}

PHASEALLOC_API int phasealloc_trace_stop(void) {
  return as_status("phasealloc_trace_stop", [] { return engine_registry::instance().stop_trace(); });
}

PHASEALLOC_API int phasealloc_trace_flush(void) {
  return as_status("phasealloc_trace_flush", [] { return engine_registry::instance().flush_traces(); });
}

PHASEALLOC_API const char* phasealloc_last_error(void) {
  thread_local std::string buffer;
  const char* out = as_string("phasealloc_last_error", buffer, [] { return last_error(); });
  return out != nullptr ? out : "";
}

PHASEALLOC_API void phasealloc_clear_last_error(void) { clear_last_error(); }

PHASEALLOC_API int phasealloc_set_event_listener(phasealloc_event_fn fn, void* context) {
  set_event_listener(fn, context);
  try {
    engine_registry::instance().refresh_sinks();  // the engines send block events only to a listener
  } catch (...) {
    report_error("phasealloc_set_event_listener: could not tell the engines (out of host memory)");
    return -1;
  }
  return 0;
}

PHASEALLOC_API int phasealloc_owner_device(const void* ptr) {
  try {
    const auto addr = reinterpret_cast<device_address>(ptr);
    for (device_slot* s : engine_registry::instance().created()) {
      if (s->observer.holds(addr)) return s->ordinal;
    }
  } catch (...) {
    // Out of host memory while listing the slots: no owner found.
  }
  return -1;
}

}  // extern "C"
