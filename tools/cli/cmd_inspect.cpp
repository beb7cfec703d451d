// phasealloc inspect TRACE [--json]: what is in a trace: events, sizes, phases, peak live bytes, streams.
#include <algorithm>
#include <array>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "phasealloc/oom_report.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "text_table.hpp"
#include "trace_input.hpp"

namespace phasealloc::cli {
namespace {

struct inspect_args {
  std::string source;
  bool json = false;
};

void run_inspect(const inspect_args& a) {
  std::string empty;
  auto loaded = load_any_trace(a.source, &empty);
  if (!loaded) throw command_error(loaded.error());
  const trace& t = loaded.value();
  if (t.events.empty()) throw command_error(empty);
  const trace_summary s = summarize(t);
  const auto valid = validate(t);

  // Size histogram by power of two of the requested bytes, and per-phase allocation counts.
  std::array<std::size_t, 48> histogram{};
  std::map<std::string, std::pair<std::size_t, std::uint64_t>> per_phase;  // allocs, bytes
  std::string phase = "unphased";
  std::uint32_t streams = 0;
  for (const trace_event& e : t.events) {
    if (e.op == trace_event_op::phase) {
      phase = e.name < t.strings.size() && !t.strings[e.name].empty() ? t.strings[e.name] : "unphased";
    } else if (e.op == trace_event_op::alloc) {
      std::size_t bucket = 0;
      while (bucket + 1 < histogram.size() && (std::uint64_t{1} << (bucket + 1)) <= e.bytes) ++bucket;
      ++histogram[bucket];
      auto& [count, bytes] = per_phase[phase];
      ++count;
      bytes += e.bytes;
      streams = std::max(streams, e.stream + 1);
    }
  }

  if (a.json) {
    nlohmann::json j{{"trace", display_name(a.source)}, {"source", t.meta.source}, {"version", t.version},
                     {"events", s.events}, {"allocs", s.allocs}, {"seeded_allocs", s.seeded_allocs},
                     {"frees", s.frees}, {"phase_changes", s.phase_changes}, {"empty_caches", s.empty_caches},
                     {"peak_live_bytes", s.peak_live_bytes}, {"final_live_bytes", s.final_live_bytes},
                     {"segment_allocs", s.segment_allocs}, {"recorded_peak_reserved_bytes", s.peak_reserved_bytes},
                     {"streams", streams}, {"duration_ns", s.duration_ns}, {"valid", valid.has_value()},
                     {"allocator_settings", t.meta.allocator_settings}};
    if (!valid) j["validation_error"] = valid.error().message();
    for (const auto& [name, v] : per_phase) j["phases"][name] = {{"allocs", v.first}, {"bytes", v.second}};
    std::cout << j.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("trace      {}\nsource     {}\nversion    {}\n", display_name(a.source), t.meta.source, t.version);
  std::cout << fmt::format("events     {} ({} allocs of which {} seeded, {} frees, {} phase changes, {} empty_cache)\n",
                           s.events, s.allocs, s.seeded_allocs, s.frees, s.phase_changes, s.empty_caches);
  std::cout << fmt::format("live bytes peak {} (the floor), at the end {}\n", format_bytes(s.peak_live_bytes),
                           format_bytes(s.final_live_bytes));
  if (s.segment_allocs + s.seeded_segments > 0) {
    std::cout << fmt::format("recorded   {} segment allocs, {} frees; recording allocator's peak reserved {}\n",
                             s.segment_allocs, s.segment_frees, format_bytes(s.peak_reserved_bytes));
  }
  if (!t.meta.allocator_settings.empty()) std::cout << "settings   " << t.meta.allocator_settings << '\n';
  std::cout << fmt::format("streams    {}\nduration   {}\n", streams, nanoseconds(s.duration_ns));
  std::cout << "valid      " << (valid ? std::string("yes") : valid.error().message()) << "\n\n";
  text_table phases({"phase", "allocs", "bytes allocated"});
  for (const auto& [name, v] : per_phase) phases.add({name, std::to_string(v.first), format_bytes(v.second)});
  std::cout << phases.render() << '\n';
  text_table sizes({"request size", "allocs"});
  for (std::size_t b = 0; b < histogram.size(); ++b) {
    if (histogram[b] == 0) continue;
    sizes.add({fmt::format("[{}, {})", format_bytes(std::size_t{1} << b), format_bytes(std::size_t{1} << (b + 1))),
               std::to_string(histogram[b])});
  }
  std::cout << sizes.render();
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<inspect_args>();
  CLI::App* cmd = app.add_subcommand("inspect", "Summarise a trace: events, sizes, phases, peak live bytes, streams");
  cmd->add_option("trace", args->source, "trace (any format replay reads, or synth:JOB)")->required();
  cmd->add_flag("--json", args->json, "print JSON");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace phasealloc::cli
