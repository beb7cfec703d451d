// phasealloc tune TRACE... [--gpu SIZE] [--weight calls=W] [--grid SPEC ...] [-j N] [--json] [-q]
//
// Replays the job's traces under every configuration of the search space (tune_search.hpp), on a
// model device of --gpu; refuses the configurations that run out of memory there; prints the
// Pareto front of peak reserved against device calls, the recommended configuration and the line
// to paste.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_options.hpp"
#include "commands.hpp"
#include "phasealloc/oom_report.hpp"
#include "replay_grid.hpp"
#include "sweep_grid.hpp"
#include "text_table.hpp"
#include "trace_input.hpp"
#include "tune_search.hpp"

namespace phasealloc::cli {
namespace {

struct tune_args {
  std::vector<std::string> sources;
  std::string gpu = "80GiB";
  std::string weight = "calls=0";
  std::vector<std::string> grids;
  unsigned long long jobs = std::max(1u, std::thread::hardware_concurrency());
  bool json = false;
  bool quiet = false;
  bool no_validate = false;
};

std::string ratio(double value, double base) { return base > 0 ? fmt::format("{:.3f}", value / base) : "-"; }

void run_tune(const tune_args& a) {
  const std::size_t gpu_bytes = parse_capacity(a.gpu);
  auto weight = parse_tune_weight(a.weight);
  if (!weight) throw command_error(weight.error());
  const unsigned hardware = std::thread::hardware_concurrency();
  auto jobs = check_jobs_option(a.jobs, hardware);
  if (!jobs) throw command_error(jobs.error());

  std::vector<std::string> specs;
  for (const std::string& g : a.grids.empty() ? default_tune_grids() : a.grids) {
    auto expanded = expand_grid(g);
    if (!expanded) throw command_error(expanded.error());
    for (std::string& s : expanded.value()) {
      if (std::find(specs.begin(), specs.end(), s) == specs.end()) specs.push_back(std::move(s));
    }
  }
  std::vector<trace> traces;
  for (const std::string& s : a.sources) {
    auto t = load_valid_trace(s, !a.no_validate);
    if (!t) throw command_error(t.error());
    traces.push_back(std::move(t).value());
  }

  // A job recorded under offload:auto carries its offload calls: each phasealloc configuration is then
  // also tried under offload:pressure and as recorded (auto); PyTorch's allocator has no offload.
  const bool has_offload = std::any_of(traces.begin(), traces.end(), [](const trace& t) {
    return std::any_of(t.events.begin(), t.events.end(), [](const trace_event& e) {
      return e.op == trace_event_op::offload || e.op == trace_event_op::restore;
    });
  });
  std::vector<offload_replay> modes{offload_replay::none};
  if (has_offload) modes.insert(modes.end(), {offload_replay::pressure, offload_replay::recorded});
  const auto started = std::chrono::steady_clock::now();
  std::vector<tune_candidate> candidates;
  std::vector<std::vector<replay_result>> results;  // per candidate, per trace
  for (const offload_replay mode : modes) {
    std::vector<std::string> mode_specs;
    for (const std::string& s : specs) {
      if (mode == offload_replay::none || !is_pytorch_spec(s)) mode_specs.push_back(s);
    }
    replay_options options;
    options.capacity_bytes = gpu_bytes;
    options.offload = mode;
    auto replayed = replay_grid(traces, mode_specs, options, jobs.value(),
                                fmt::format("tuning: {} configurations x {} traces{}", mode_specs.size(),
                                            traces.size(), has_offload ? fmt::format(", offload {}", to_string(mode)) : ""),
                                !a.quiet && !a.json);
    if (!replayed) throw command_error(replayed.error());
    for (std::size_t i = 0; i < mode_specs.size(); ++i) {
      tune_candidate c;
      c.spec = mode_specs[i];
      c.offload = mode;
      for (const replay_result& r : replayed.value()[i]) {
        c.peak_reserved_bytes = std::max(c.peak_reserved_bytes, r.peak_reserved_bytes);
        c.device_calls += r.device_calls();
        c.modeled_device_time_ns += r.modeled_device_time_ns;
        c.ooms += r.ooms;
        c.moved_bytes += r.offloaded_bytes + r.restored_bytes;
        if (const phase_residency* g = r.headroom.phase("generation")) {
          c.generating_peak_bytes = std::max(c.generating_peak_bytes, g->peak_reserved_bytes);
        }
      }
      candidates.push_back(std::move(c));
      results.push_back(std::move(replayed.value()[i]));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::vector<std::size_t> front = pareto_front(candidates);
  const std::optional<std::size_t> best = recommend(candidates, front, weight.value());
  const auto baseline = std::find_if(candidates.begin(), candidates.end(), [](const tune_candidate& c) { return c.spec == "pytorch"; });
  const std::size_t refused = static_cast<std::size_t>(
      std::count_if(candidates.begin(), candidates.end(), [](const tune_candidate& c) { return c.refused(); }));

  if (a.json) {
    nlohmann::json doc;
    doc["traces"] = a.sources;
    doc["gpu_bytes"] = gpu_bytes;
    doc["calls_weight"] = weight.value();
    doc["candidates"] = nlohmann::json::array();
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const tune_candidate& c = candidates[i];
      nlohmann::json j{{"policy", c.spec},
                       {"offload", std::string(to_string(c.offload))},
                       {"moved_bytes", c.moved_bytes},
                       {"peak_reserved_bytes", c.peak_reserved_bytes},
                       {"device_calls", c.device_calls},
                       {"modeled_device_time_ns", c.modeled_device_time_ns},
                       {"ooms", c.ooms},
                       {"generating_peak_reserved_bytes", c.generating_peak_bytes},
                       {"refused", c.refused()},
                       {"on_front", std::find(front.begin(), front.end(), i) != front.end()}};
      j["per_trace"] = nlohmann::json::array();
      for (const replay_result& r : results[i]) {
        j["per_trace"].push_back(
            {{"peak_reserved_bytes", r.peak_reserved_bytes}, {"device_calls", r.device_calls()}, {"ooms", r.ooms}});
      }
      doc["candidates"].push_back(std::move(j));
    }
    doc["front"] = nlohmann::json::array();
    for (const std::size_t i : front) doc["front"].push_back(candidate_name(candidates[i]));
    doc["recommended"] = best ? nlohmann::json(candidate_name(candidates[*best])) : nlohmann::json(nullptr);
    doc["paste"] = best ? nlohmann::json(paste_line(candidates[*best].spec, candidates[*best].offload))
                        : nlohmann::json(nullptr);
    std::cout << doc.dump(2) << '\n';
  } else {
    std::cout << fmt::format("tune   {} trace(s), {} configurations, model device {}: {} replays in {:.1f} s ({} thread(s))\n",
                             traces.size(), candidates.size(), format_bytes(gpu_bytes), candidates.size() * traces.size(),
                             seconds, jobs.value());
    std::cout << fmt::format("refused {} configuration(s) that run out of memory at {}\n", refused, format_bytes(gpu_bytes));
    if (has_offload) {
      std::cout << "offload: the traces carry recorded offload calls (offload:auto); each phasealloc configuration was "
                   "replayed without offload, under offload:pressure and as recorded (auto)\n";
    }
    std::cout << "\n";
    if (!front.empty()) {
      std::cout << fmt::format("Pareto front: peak reserved ({}) against device calls ({})\n",
                               traces.size() > 1 ? "the largest over the traces" : "the trace's",
                               traces.size() > 1 ? "summed" : "reserve + release + map + unmap");
      const bool generating = std::any_of(candidates.begin(), candidates.end(),
                                          [](const tune_candidate& c) { return c.generating_peak_bytes > 0; });
      std::vector<std::string> header{"", "configuration", "peak reserved", "vs pytorch", "device calls", "vs pytorch",
                                      "est. device time"};
      if (generating) header.push_back("reserved while generating");
      if (has_offload) header.push_back("moved to the host and back");
      text_table table(header);
      for (const std::size_t i : front) {
        const tune_candidate& c = candidates[i];
        const bool have_base = baseline != candidates.end() && !baseline->refused();
        std::vector<std::string> row{
            best && *best == i ? "*" : "", candidate_name(c), format_bytes(c.peak_reserved_bytes),
            have_base ? ratio(static_cast<double>(c.peak_reserved_bytes), static_cast<double>(baseline->peak_reserved_bytes)) : "-",
            std::to_string(c.device_calls),
            have_base ? ratio(static_cast<double>(c.device_calls), static_cast<double>(baseline->device_calls)) : "-",
            nanoseconds(c.modeled_device_time_ns)};
        if (generating) row.push_back(c.generating_peak_bytes > 0 ? format_bytes(c.generating_peak_bytes) : "-");
        if (has_offload) row.push_back(format_bytes(c.moved_bytes));
        table.add(std::move(row));
      }
      std::cout << table.render();
    }
  }
  if (!best) {
    throw command_error(fmt::format("every configuration runs out of memory at --gpu {}: the job does not fit",
                                    format_bytes(gpu_bytes)));
  }
  if (!a.json) {
    std::cout << fmt::format("\nrecommended (--weight calls={}: the lowest peak / lowest peak + {} x calls / fewest calls): {}\n",
                             weight.value(), weight.value(), candidate_name(candidates[*best]));
    std::cout << "paste:  " << paste_line(candidates[*best].spec, candidates[*best].offload) << '\n';
  }
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto args = std::make_shared<tune_args>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Pick the allocator configuration for a job: the Pareto front of peak reserved vs device calls");
  cmd->add_option("traces", args->sources, "the job's traces (any format replay reads, or synth:JOB)")->required();
  cmd->add_option("--gpu", args->gpu, "the GPU's memory: configurations that run out there are refused")
      ->capture_default_str();
  cmd->add_option("--weight", args->weight,
                  "calls=W: recommend the lowest peak/lowest + W x calls/fewest (0: the lowest peak)")
      ->capture_default_str();
  cmd->add_option("-g,--grid", args->grids, "replace the search space with these grids ({a,b} groups multiply)");
  cmd->add_option("-j,--jobs", args->jobs, "replays in parallel (at most the machine's hardware threads)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "print every configuration, the front and the recommendation as JSON");
  cmd->add_flag("-q,--quiet", args->quiet, "no progress bar");
  cmd->add_flag("--no-validate", args->no_validate, "skip checking the traces first");
  cmd->callback([args] { run_tune(*args); });
}

}  // namespace phasealloc::cli
