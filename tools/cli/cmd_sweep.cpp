// phasealloc sweep TRACE... --grid SPEC [--grid SPEC ...] [--capacity 80GiB] [--jobs N] [--top N] [--json]
//
// Replays every point of the grids on every trace and ranks the points by peak reserved relative
// to each trace's floor (mean over traces); points that ran out of memory rank last.
#include <algorithm>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_options.hpp"
#include "commands.hpp"
#include "phasealloc/conf.hpp"
#include "phasealloc/oom_report.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "replay_grid.hpp"
#include "sweep_grid.hpp"
#include "text_table.hpp"
#include "trace_input.hpp"

namespace phasealloc::cli {
namespace {

struct sweep_args {
  std::vector<std::string> sources;
  std::vector<std::string> grids;
  std::string capacity = "80GiB";
  unsigned long long jobs = 1;
  std::size_t top = 20;
  bool json = false;
  bool quiet = false;
  bool no_validate = false;
};

struct point {
  std::string spec;
  std::vector<replay_result> per_trace;
  double score = 0;      ///< Mean peak reserved / floor.
  std::int64_t ooms = 0;
  std::int64_t device_calls = 0;
};

void run_sweep(const sweep_args& a) {
  const std::optional<std::size_t> capacity = parse_capacity(a.capacity);
  // Threads are checked against the machine before anything is loaded: one replay per thread, and
  // more threads than hardware threads only adds memory (each replay holds a model device).
  if (auto jobs = check_jobs_option(a.jobs, std::thread::hardware_concurrency()); !jobs) {
    throw command_error(jobs.error());
  }
  std::vector<trace> traces;
  std::vector<std::uint64_t> floors;
  for (const std::string& s : a.sources) {
    auto t = load_valid_trace(s, !a.no_validate);
    if (!t) throw command_error(t.error());
    floors.push_back(std::max<std::uint64_t>(1, summarize(t.value()).peak_live_bytes));
    traces.push_back(std::move(t).value());
  }
  std::vector<point> points;
  for (const std::string& g : a.grids) {
    auto specs = expand_grid(g);
    if (!specs) throw command_error(specs.error());
    for (std::string& s : specs.value()) points.push_back({std::move(s), {}, 0, 0, 0});
  }

  std::vector<std::string> specs;
  for (const point& p : points) specs.push_back(p.spec);
  replay_options options;
  options.capacity_bytes = *capacity;
  auto results = replay_grid(traces, specs, options, a.jobs,
                             fmt::format("sweeping {} points x {} traces", points.size(), traces.size()), !a.quiet);
  if (!results) throw command_error(results.error());
  for (std::size_t i = 0; i < points.size(); ++i) points[i].per_trace = std::move(results.value()[i]);

  for (point& p : points) {
    for (std::size_t ti = 0; ti < traces.size(); ++ti) {
      p.score += static_cast<double>(p.per_trace[ti].peak_reserved_bytes) / static_cast<double>(floors[ti]);
      p.ooms += p.per_trace[ti].ooms;
      p.device_calls += p.per_trace[ti].device_calls();
    }
    p.score /= static_cast<double>(traces.size());
  }
  std::stable_sort(points.begin(), points.end(), [](const point& x, const point& y) {
    if ((x.ooms > 0) != (y.ooms > 0)) return x.ooms == 0;
    if (x.score != y.score) return x.score < y.score;
    return x.device_calls < y.device_calls;
  });

  if (a.json) {
    nlohmann::json doc;
    doc["traces"] = a.sources;
    doc["floor_bytes"] = floors;
    doc["ranking"] = nlohmann::json::array();
    for (const point& p : points) {
      nlohmann::json j{{"policy", p.spec}, {"mean_reserved_over_floor", p.score}, {"ooms", p.ooms},
                       {"device_calls", p.device_calls}};
      for (const replay_result& r : p.per_trace) j["peak_reserved_bytes"].push_back(r.peak_reserved_bytes);
      doc["ranking"].push_back(std::move(j));
    }
    std::cout << doc.dump(2) << '\n';
    return;
  }
  std::vector<std::string> header{"rank", "policy", "reserved / floor"};
  for (const std::string& s : a.sources) header.push_back(display_name(s));
  header.insert(header.end(), {"device calls", "OOMs"});
  text_table table(header);
  for (std::size_t i = 0; i < points.size() && i < a.top; ++i) {
    const point& p = points[i];
    std::vector<std::string> row{std::to_string(i + 1), p.spec, fmt::format("{:.3f}", p.score)};
    for (const replay_result& r : p.per_trace) row.push_back(format_bytes(r.peak_reserved_bytes));
    row.push_back(std::to_string(p.device_calls));
    row.push_back(std::to_string(p.ooms));
    table.add(std::move(row));
  }
  std::cout << table.render();
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<sweep_args>();
  CLI::App* cmd = app.add_subcommand("sweep", "Rank a grid of policy configurations on one or more traces");
  cmd->add_option("traces", args->sources, "traces (any format replay reads, or synth:JOB)")->required();
  cmd->add_option("-g,--grid", args->grids,
                  "policy grid, repeatable; {a,b} groups multiply: 'pytorch:max_split_size_mb:{64,256}'")
      ->required();
  cmd->add_option("-c,--capacity", args->capacity, "model device capacity")->capture_default_str();
  cmd->add_option("-j,--jobs", args->jobs, "replays in parallel (at most the machine's hardware threads)")
      ->capture_default_str();
  cmd->add_option("--top", args->top, "rows to print")->capture_default_str();
  cmd->add_flag("--json", args->json, "print the whole ranking as JSON");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress bar");
  cmd->add_flag("--no-validate", args->no_validate, "skip checking the traces before the sweep");
  cmd->callback([args] { run_sweep(*args); });
}

}  // namespace phasealloc::cli
