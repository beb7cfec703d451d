#include "replay_output.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "commands.hpp"
#include "phasealloc/oom_report.hpp"
#include "phasealloc/report/report.hpp"
#include "text_table.hpp"

namespace phasealloc::cli {

namespace {

std::uint64_t property_bytes(const trace& t, std::string_view key) {
  const std::string* v = find_property(t.meta, key);
  if (v == nullptr) return 0;
  std::uint64_t out = 0;
  for (const char c : *v) {
    if (c < '0' || c > '9') return 0;
    out = out * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return out;
}

std::string signed_percent(std::size_t modelled, std::size_t recorded) {
  if (recorded == 0) return "-";
  const double d = (static_cast<double>(modelled) - static_cast<double>(recorded)) / static_cast<double>(recorded);
  return fmt::format("{:+.3f}%", 100.0 * d);
}

std::string describe(const reserved_divergence& d) {
  return fmt::format("event {} ({}, t={}): recorded {}, modelled {}", d.event, to_string(d.op),
                     nanoseconds(d.time_ns), format_bytes(d.recorded_bytes), format_bytes(d.modelled_bytes));
}

nlohmann::json divergence_json(const std::optional<reserved_divergence>& d) {
  if (!d) return nullptr;
  return {{"event", d->event},
          {"time_ns", d->time_ns},
          {"op", std::string(to_string(d->op))},
          {"recorded_reserved_bytes", d->recorded_bytes},
          {"modelled_reserved_bytes", d->modelled_bytes}};
}

/// Colocation headroom: reserved while each phase runs (peak / time-weighted mean), and what the
/// policy returned at each kind of transition (mean per transition, and how many there were).
std::string render_headroom_text(const std::vector<replay_result>& results) {
  std::vector<std::string> names;
  std::vector<std::pair<std::string, std::string>> kinds;
  for (const replay_result& x : results) {
    for (const phase_residency& p : x.headroom.phases) {
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
    }
    for (const transition_summary& t : x.headroom.summarize_transitions()) {
      if (std::find(kinds.begin(), kinds.end(), std::pair(t.from, t.to)) == kinds.end()) kinds.emplace_back(t.from, t.to);
    }
  }
  if (names.empty()) return {};
  const std::string weighted = results.front().headroom.weighted_by;
  std::vector<std::string> header{fmt::format("phase: reserved while it runs, peak / {}-weighted mean",
                                              weighted == "time" ? "time" : "event")};
  for (const replay_result& x : results) header.push_back(x.policy);
  text_table held(header);
  for (const std::string& name : names) {
    std::vector<std::string> row{name};
    for (const replay_result& x : results) {
      const phase_residency* p = x.headroom.phase(name);
      row.push_back(p == nullptr ? "-"
                                 : fmt::format("{} / {}", format_bytes(p->peak_reserved_bytes),
                                               format_bytes(static_cast<std::size_t>(p->mean_reserved_bytes))));
    }
    held.add(std::move(row));
  }
  std::string out = "\n" + held.render();
  if (kinds.empty()) return out;
  header = {"transition: returned, mean per transition (count)"};
  for (const replay_result& x : results) header.push_back(x.policy);
  text_table returned(header);
  for (const auto& [from, to] : kinds) {
    std::vector<std::string> row{fmt::format("{} -> {}", from, to)};
    for (const replay_result& x : results) {
      std::string cell = "-";
      for (const transition_summary& t : x.headroom.summarize_transitions()) {
        if (t.from == from && t.to == to) {
          cell = fmt::format("{} ({})", format_bytes(static_cast<std::size_t>(t.returned_mean_bytes())), t.count);
        }
      }
      row.push_back(std::move(cell));
    }
    returned.add(std::move(row));
  }
  return out + "\n" + returned.render();
}

/// Names as in torch.cuda.memory_stats() where one exists (reserved_bytes.all.peak); the mean and
/// the bytes returned have no counterpart there.
nlohmann::json headroom_json(const colocation_headroom& h) {
  nlohmann::json j;
  j["weighted_by"] = h.weighted_by;
  j["phases"] = nlohmann::json::array();
  for (const phase_residency& p : h.phases) {
    j["phases"].push_back({{"name", p.name},
                           {"intervals", p.intervals},
                           {"duration_ns", p.duration_ns},
                           {"reserved_bytes.all.peak", p.peak_reserved_bytes},
                           {"reserved_bytes.all.mean", p.mean_reserved_bytes}});
  }
  j["transitions"] = nlohmann::json::array();
  for (const transition_return& t : h.transitions) {
    j["transitions"].push_back({{"event", t.event},
                                {"time_ns", t.time_ns},
                                {"from", t.from},
                                {"to", t.to},
                                {"reserved_bytes.all.before", t.reserved_before_bytes},
                                {"reserved_bytes.all.after", t.reserved_after_bytes},
                                {"returned_bytes", t.returned_bytes()}});
  }
  j["transition_kinds"] = nlohmann::json::array();
  for (const transition_summary& t : h.summarize_transitions()) {
    j["transition_kinds"].push_back({{"from", t.from},
                                     {"to", t.to},
                                     {"count", t.count},
                                     {"returned_bytes.total", t.returned_total_bytes},
                                     {"returned_bytes.max", t.returned_max_bytes},
                                     {"returned_bytes.mean", t.returned_mean_bytes()}});
  }
  return j;
}

}  // namespace

std::string recorded_source(const trace& t) {
  // Only importers of PyTorch's own recordings set it: a phasealloc recording's segment events are
  // another allocator's, and comparing the pytorch model with them says nothing about fidelity.
  if (const std::string* s = find_property(t.meta, "recorded.source")) return *s;
  return {};
}

std::vector<std::string> input_notes(const trace& t) {
  std::vector<std::string> notes;
  if (const std::string* device = find_property(t.meta, "kineto.device_id")) {
    const std::string* choice = find_property(t.meta, "kineto.device_choice");
    const std::string* devices = find_property(t.meta, "kineto.devices");
    notes.push_back(fmt::format("profiler trace: CUDA device {} ({}; memory events per device {}; --recorded-gpu N "
                                "picks another)",
                                *device, choice != nullptr ? *choice : "?", devices != nullptr ? *devices : "?"));
    const std::uint64_t baseline = property_bytes(t, "kineto.baseline_bytes");
    if (baseline > 0) {
      notes.push_back(fmt::format("profiler trace: {} live before the first event ({} of it in one seeded block the "
                                  "trace never frees); the floor and the replay include it",
                                  format_bytes(baseline),
                                  format_bytes(property_bytes(t, "kineto.baseline_unattributed_bytes"))));
    }
  }
  if (const std::string* start = find_property(t.meta, "snapshot.start")) notes.push_back("snapshot: " + *start);
  return notes;
}

std::string render_fidelity_text(const replay_report& r) {
  std::string out;
  for (const replay_result& x : r.results) {
    const recorded_comparison& c = x.recorded;
    // Only a model of the recording allocator is meant to follow the recording; the others' gaps
    // are their savings.
    if (r.recorded_source.empty() || !c.available || !x.models_recording) continue;
    if (out.empty()) {
      out = fmt::format("\nrecorded ({}): peak reserved {}, at the end {}\n", r.recorded_source,
                        format_bytes(c.recorded_peak_reserved_bytes), format_bytes(c.recorded_final_reserved_bytes));
    }
    out += fmt::format("{}: peak reserved {} ({} vs recorded), at the end {}", x.policy,
                       format_bytes(x.peak_reserved_bytes),
                       signed_percent(x.peak_reserved_bytes, c.recorded_peak_reserved_bytes),
                       format_bytes(x.final_reserved_bytes));
    if (r.recorded_source != "kineto Total Reserved") {
      out += fmt::format(", segments at the end {} (recorded {})", x.final_segments, c.recorded_final_segments);
    }
    out += "\n";
    if (!c.first_divergence) {
      out += "  reserved equals the recorded level after every alloc and free\n";
    } else {
      out += "  first divergence: " + describe(*c.first_divergence) + "\n";
      out += "  largest gap:      " + describe(*c.largest_divergence) + "\n";
    }
  }
  return out;
}

std::string render_replay_text(const replay_report& r) {
  std::string out = fmt::format("trace  {}: {} events, floor (peak live bytes) {}\n", r.trace_name, r.events,
                                format_bytes(r.floor_bytes));
  for (const std::string& note : r.notes) out += "note   " + note + "\n";
  out += fmt::format("device model, capacity {}\n\n", format_bytes(r.capacity_bytes));
  text_table overall({"policy", "peak reserved", "peak allocated", "frag", "over floor", "device calls",
                      "est. device time", "OOMs", "replay"});
  for (const replay_result& x : r.results) {
    overall.add({x.policy, format_bytes(x.peak_reserved_bytes), format_bytes(x.peak_allocated_bytes),
                 percent(x.fragmentation()),
                 format_bytes(x.peak_reserved_bytes > r.floor_bytes ? x.peak_reserved_bytes - r.floor_bytes : 0),
                 fmt::format("{} ({}/{}/{}/{})", x.device_calls(), x.device_allocs, x.device_frees, x.device_maps,
                             x.device_unmaps),
                 nanoseconds(x.modeled_device_time_ns), std::to_string(x.ooms),
                 fmt::format("{:.2f} s", x.wall_seconds)});
  }
  out += overall.render();
  out += "device calls: total (reserve/release/map/unmap); est. device time is modelled, not measured.\n";
  for (const replay_result& x : r.results) {
    if (x.offloaded_bytes == 0 && x.restored_bytes == 0) continue;
    out += fmt::format("offload {}: {} of pages to the host and {} back ({})", x.policy,
                       format_bytes(x.offloaded_bytes), format_bytes(x.restored_bytes),
                       x.offload_mode == offload_replay::pressure
                           ? fmt::format("offload:pressure: {} recorded call(s) made when an allocation ran out of "
                                         "memory, {} allocation(s) fitted then",
                                         x.pressure_calls, x.pressure_relieved)
                           : std::string("the recorded calls"));
    if (r.link_bytes_per_second != 0) {
      out += fmt::format(": {:.3f} s of copies at {}/s (modelled, not overlapped)",
                         static_cast<double>(x.offloaded_bytes + x.restored_bytes) /
                             static_cast<double>(r.link_bytes_per_second),
                         format_bytes(r.link_bytes_per_second));
    }
    out += "\n";
  }
  for (const replay_result& x : r.results) {
    if (x.offload_failures == 0) continue;
    out += fmt::format("offload {}: {} recorded call(s) refused, the first: {}\n", x.policy, x.offload_failures,
                       x.first_offload_failure);
  }

  // Per phase: one row per phase, one column pair per policy.
  std::vector<std::string> phase_names;
  for (const replay_result& x : r.results) {
    for (const phase_stats& p : x.phases) {
      if (std::find(phase_names.begin(), phase_names.end(), p.name) == phase_names.end()) phase_names.push_back(p.name);
    }
  }
  if (!phase_names.empty()) {
    std::vector<std::string> header{"phase: peak reserved / frag"};
    for (const replay_result& x : r.results) header.push_back(x.policy);
    text_table phases(header);
    for (const std::string& name : phase_names) {
      std::vector<std::string> row{name};
      for (const replay_result& x : r.results) {
        const auto it = std::find_if(x.phases.begin(), x.phases.end(), [&](auto& p) { return p.name == name; });
        row.push_back(it == x.phases.end()
                          ? "-"
                          : fmt::format("{} / {}", format_bytes(static_cast<std::size_t>(it->peak_reserved_bytes)),
                                        percent(it->fragmentation())));
      }
      phases.add(std::move(row));
    }
    out += "\n" + phases.render();
  }
  out += render_headroom_text(r.results);
  return out;
}

nlohmann::json replay_json(const replay_report& r) {
  nlohmann::json doc;
  doc["trace"] = r.trace_name;
  doc["events"] = r.events;
  doc["floor_bytes"] = r.floor_bytes;
  doc["capacity_bytes"] = r.capacity_bytes;
  doc["link_bytes_per_second"] = r.link_bytes_per_second;
  doc["notes"] = r.notes;
  doc["results"] = nlohmann::json::array();
  for (const replay_result& x : r.results) {
    nlohmann::json j;
    j["policy"] = x.policy;
    j["device"] = x.device;
    j["peak_reserved_bytes"] = x.peak_reserved_bytes;
    j["peak_allocated_bytes"] = x.peak_allocated_bytes;
    j["peak_requested_bytes"] = x.peak_requested_bytes;
    j["final_reserved_bytes"] = x.final_reserved_bytes;
    j["final_allocated_bytes"] = x.final_allocated_bytes;
    j["final_requested_bytes"] = x.final_requested_bytes;
    j["final_segments"] = x.final_segments;
    if (x.recorded.available && !r.recorded_source.empty()) {
      const recorded_comparison& c = x.recorded;
      j["recorded"] = {{"source", r.recorded_source},
                       {"peak_reserved_bytes", c.recorded_peak_reserved_bytes},
                       {"final_reserved_bytes", c.recorded_final_reserved_bytes},
                       {"final_segments", c.recorded_final_segments},
                       {"first_divergence", divergence_json(c.first_divergence)},
                       {"largest_divergence", divergence_json(c.largest_divergence)}};
    }
    j["fragmentation"] = x.fragmentation();
    j["device_allocs"] = x.device_allocs;
    j["device_frees"] = x.device_frees;
    j["device_maps"] = x.device_maps;
    j["device_unmaps"] = x.device_unmaps;
    j["device_calls"] = x.device_calls();
    j["alloc_retries"] = x.alloc_retries;
    j["ooms"] = x.ooms;
    j["offloaded_bytes"] = x.offloaded_bytes;
    j["restored_bytes"] = x.restored_bytes;
    j["offload_failures"] = x.offload_failures;
    j["offload_mode"] = std::string(to_string(x.offload_mode));
    j["pressure_calls"] = x.pressure_calls;
    j["pressure_relieved"] = x.pressure_relieved;
    if (r.link_bytes_per_second != 0) {
      j["modelled_copy_seconds"] =
          static_cast<double>(x.offloaded_bytes + x.restored_bytes) / static_cast<double>(r.link_bytes_per_second);
    }
    if (x.offload_failures != 0) j["first_offload_failure"] = x.first_offload_failure;
    j["modeled_device_time_ns"] = x.modeled_device_time_ns;
    j["wall_seconds"] = x.wall_seconds;
    j["phases"] = nlohmann::json::array();
    for (const phase_stats& p : x.phases) {
      j["phases"].push_back({{"name", p.name},
                             {"intervals", p.intervals},
                             {"peak_reserved_bytes", p.peak_reserved_bytes},
                             {"peak_allocated_bytes", p.peak_allocated_bytes},
                             {"peak_active_bytes", p.peak_active_bytes},
                             {"peak_requested_bytes", p.peak_requested_bytes},
                             {"fragmentation", p.fragmentation()},
                             {"reserved_unallocated_at_peak_bytes", p.reserved_unallocated_at_peak_bytes},
                             {"largest_free_block_at_peak_bytes", p.largest_free_block_at_peak_bytes},
                             {"device_allocs", p.num_device_alloc},
                             {"device_frees", p.num_device_free},
                             {"device_maps", p.num_device_map},
                             {"device_unmaps", p.num_device_unmap},
                             {"released_bytes", p.released_bytes},
                             {"offloaded_bytes", p.offloaded_bytes},
                             {"restored_bytes", p.restored_bytes},
                             {"ooms", p.num_ooms}});
    }
    j["colocation"] = headroom_json(x.headroom);
    doc["results"].push_back(std::move(j));
  }
  return doc;
}

void write_replay_html(const std::string& path, const replay_report& report, const std::string& generated_by) {
  report_input in;
  in.trace_name = report.trace_name;
  in.floor_bytes = report.floor_bytes;
  in.capacity_bytes = report.capacity_bytes;
  in.results = report.results;
  in.generated_by = generated_by;
  auto written = write_html_report(path, in);
  if (!written) throw command_error(written.error());
}

}  // namespace phasealloc::cli

namespace phasealloc::cli {
namespace {

std::string process_label(const colocated_report& r, std::size_t p) {
  return fmt::format("{} {}", p, p < r.trace_names.size() ? r.trace_names[p] : std::string("?"));
}

std::string describe_oom(const colocated_oom& o) {
  return fmt::format("event {}, t={}, {} requested", o.event, nanoseconds(o.time_ns), format_bytes(o.requested_bytes));
}

nlohmann::json oom_json(const colocated_report& r, const std::optional<colocated_oom>& o) {
  if (!o) return nullptr;
  return {{"process", o->process},
          {"trace", o->process < r.trace_names.size() ? r.trace_names[o->process] : std::string()},
          {"event", o->event},
          {"time_ns", o->time_ns},
          {"requested_bytes", o->requested_bytes}};
}

}  // namespace

std::string render_colocated_text(const colocated_report& r) {
  std::string out = fmt::format("colocated  {} processes on one model device, capacity {}; events merged by time "
                                "(ties: trace order)\n",
                                r.trace_names.size(), format_bytes(r.capacity_bytes));
  for (std::size_t p = 0; p < r.trace_names.size(); ++p) {
    out += fmt::format("process {}: {} events, floor (peak live bytes) {}\n", process_label(r, p), r.events[p],
                       format_bytes(r.floor_bytes[p]));
  }
  for (const colocated_result& x : r.results) {
    out += fmt::format("\npolicy {} ({}), each process with its own allocator\n", x.policy, x.device);
    text_table table({"process", "peak reserved", "peak allocated", "device calls", "OOMs", "first OOM"});
    for (std::size_t p = 0; p < x.processes.size(); ++p) {
      const colocated_process& c = x.processes[p];
      table.add({process_label(r, p), format_bytes(c.peak_reserved_bytes), format_bytes(c.peak_allocated_bytes),
                 std::to_string(c.device_allocs + c.device_frees + c.device_maps + c.device_unmaps),
                 std::to_string(c.ooms), c.first_oom ? describe_oom(*c.first_oom) : std::string("-")});
    }
    out += table.render();
    std::string shares;
    for (std::size_t p = 0; p < x.reserved_at_peak_bytes.size(); ++p) {
      shares += fmt::format("{}{}", p == 0 ? "" : " + ", format_bytes(x.reserved_at_peak_bytes[p]));
    }
    out += fmt::format("device total peak reserved {} of {} (t={}: {})\n", format_bytes(x.peak_reserved_bytes),
                       format_bytes(x.capacity_bytes), nanoseconds(x.peak_time_ns), shares);
    if (x.first_oom) {
      out += fmt::format("first out of memory: process {} at {}\n", process_label(r, x.first_oom->process),
                         describe_oom(*x.first_oom));
    } else {
      out += "first out of memory: none, every process fits\n";
    }
  }
  return out;
}

nlohmann::json colocated_json(const colocated_report& r) {
  nlohmann::json doc;
  doc["colocated"] = true;
  doc["capacity_bytes"] = r.capacity_bytes;
  doc["processes"] = nlohmann::json::array();
  for (std::size_t p = 0; p < r.trace_names.size(); ++p) {
    doc["processes"].push_back(
        {{"process", p}, {"trace", r.trace_names[p]}, {"events", r.events[p]}, {"floor_bytes", r.floor_bytes[p]}});
  }
  doc["results"] = nlohmann::json::array();
  for (const colocated_result& x : r.results) {
    nlohmann::json j;
    j["policy"] = x.policy;
    j["device"] = x.device;
    j["events"] = x.events;
    j["peak_reserved_bytes"] = x.peak_reserved_bytes;
    j["peak_time_ns"] = x.peak_time_ns;
    j["peak_event"] = x.peak_event;
    j["reserved_at_peak_bytes"] = x.reserved_at_peak_bytes;
    j["ooms"] = x.ooms;
    j["first_oom"] = oom_json(r, x.first_oom);
    j["modeled_device_time_ns"] = x.modeled_device_time_ns;
    j["wall_seconds"] = x.wall_seconds;
    j["processes"] = nlohmann::json::array();
    for (std::size_t p = 0; p < x.processes.size(); ++p) {
      const colocated_process& c = x.processes[p];
      j["processes"].push_back({{"process", p},
                                {"trace", p < r.trace_names.size() ? r.trace_names[p] : std::string()},
                                {"peak_reserved_bytes", c.peak_reserved_bytes},
                                {"peak_allocated_bytes", c.peak_allocated_bytes},
                                {"peak_requested_bytes", c.peak_requested_bytes},
                                {"final_reserved_bytes", c.final_reserved_bytes},
                                {"device_allocs", c.device_allocs},
                                {"device_frees", c.device_frees},
                                {"device_maps", c.device_maps},
                                {"device_unmaps", c.device_unmaps},
                                {"ooms", c.ooms},
                                {"first_oom", oom_json(r, c.first_oom)},
                                {"seeded_segments", c.seeded_segments}});
    }
    doc["results"].push_back(std::move(j));
  }
  return doc;
}

namespace {

nlohmann::json moment_json(const layout_moment& m) {
  nlohmann::json pools = nlohmann::json::array();
  for (const pool_peak_part& p : m.pools) {
    pools.push_back({{"pool", p.pool}, {"mapped_bytes", p.mapped_bytes}, {"allocated_bytes", p.allocated_bytes},
                     {"free_bytes", p.free_bytes()}, {"live_page_free_bytes", p.live_page_free_bytes},
                     {"live_pages", p.live_pages}, {"live_pages_one_block", p.live_pages_one_block},
                     {"hole_bytes", p.hole_bytes}, {"holes", p.holes}, {"largest_hole_bytes", p.largest_hole_bytes},
                     {"small_hole_bytes", p.small_hole_bytes}, {"edge_bytes", p.edge_bytes}, {"edges", p.edges}});
  }
  return {{"event", m.event}, {"phase", m.phase}, {"reserved_bytes", m.reserved_bytes},
          {"allocated_bytes", m.allocated_bytes}, {"pools", std::move(pools)}};
}

}  // namespace

nlohmann::json peak_explanations_json(const std::vector<peak_explanation>& explained) {
  nlohmann::json out = nlohmann::json::array();
  for (const peak_explanation& e : explained) {
    out.push_back({{"policy", e.policy}, {"page_bytes", e.page_bytes}, {"peak_reserved_bytes", e.peak_reserved_bytes},
                   {"peak_allocated_bytes", e.peak_allocated_bytes}, {"at_peak_reserved", moment_json(e.at_peak_reserved)},
                   {"at_peak_allocated", moment_json(e.at_peak_allocated)}});
  }
  return out;
}

}  // namespace phasealloc::cli
