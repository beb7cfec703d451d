// phasealloc replay TRACE --policy SPEC [--policy SPEC ...] [--capacity 80GiB] [--json] [--html FILE]
//                  [--engine model|torch|both]
// phasealloc replay --colocate TRACE TRACE [TRACE ...] --policy SPEC [...] [--capacity 80GiB] [--json]
//     the traces as processes on one GPU: each with its own allocator, sharing the capacity
//     (phasealloc/replay/colocate.hpp).
#include <cstdio>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "cli_options.hpp"
#include "commands.hpp"
#include "phasealloc/conf.hpp"
#include "phasealloc/replay/peak_explain.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "progress_bar.hpp"
#include "replay_command.hpp"
#include "replay_output.hpp"
#include "torch_engine.hpp"
#include "trace_input.hpp"

namespace phasealloc::cli {
namespace {

/// Where the model's and PyTorch's segment events first differ ("" when they do not).
std::string first_divergence(const std::vector<segment_step>& model, const std::vector<segment_step>& torch,
                             nlohmann::json& json) {
  const std::size_t n = std::min(model.size(), torch.size());
  std::size_t k = 0;
  while (k < n && model[k] == torch[k]) ++k;
  json = {{"segment_events_model", model.size()}, {"segment_events_torch", torch.size()}};
  if (k == n && model.size() == torch.size()) {
    json["first_divergence"] = nullptr;
    return fmt::format("segment events: {} equal in count, order and size (model and PyTorch)\n", model.size());
  }
  const auto describe = [&](const std::vector<segment_step>& v) {
    return k < v.size() ? fmt::format("{} {} B", v[k].action, v[k].bytes) : std::string("(none)");
  };
  json["first_divergence"] = {{"index", k}, {"model", describe(model)}, {"torch", describe(torch)}};
  return fmt::format("segment events: first divergence at #{}: model {}, PyTorch {} ({} vs {} events)\n", k,
                     describe(model), describe(torch), model.size(), torch.size());
}

/// --recorded-gpu N: the recorded GPU to import.
trace_input_options input_options(const std::optional<std::uint32_t>& gpu) {
  trace_input_options options;
  options.device = gpu;
  return options;
}

}  // namespace

void run_replay(const replay_args& a, const std::string& invocation) {
  const std::size_t capacity_bytes = parse_capacity(a.capacity);
  const std::optional<std::size_t> capacity = capacity_bytes;
  trace_summary summary;
  auto loaded = load_valid_trace(a.source, !a.no_validate, input_options(a.recorded_gpu), &summary);
  if (!loaded) throw command_error(loaded.error());
  const trace& t = loaded.value();

  replay_report report;
  report.trace_name = display_name(a.source);
  report.events = t.events.size();
  report.floor_bytes = summary.peak_live_bytes;
  report.capacity_bytes = *capacity;
  report.link_bytes_per_second = parse_link(a.link);
  report.notes = input_notes(t);
  report.recorded_source = recorded_source(t);

  const bool model = a.engine != "torch";
  const bool torch = a.engine != "model";
  std::string divergences;
  nlohmann::json divergence_json = nlohmann::json::array();
  for (const std::string& spec : a.policies) {
    replay_result modelled;
    std::optional<torch_replay> real;
    std::string model_spec = spec;
    if (torch) {
      real = replay_with_torch(t, spec, *capacity);
      // Beside a wheel, the model takes that wheel's order of equal-size free blocks (torch 2.11
      // and 2.15 differ, pytorch_policy.cpp) unless the spec names one.
      model_spec = spec_for_block_order(spec, real->block_order);
    }
    if (model) {
      replay_options options;
      options.capacity_bytes = *capacity;
      if (a.device == "vmm") options.virtual_memory = true;
      if (a.device == "segments") options.virtual_memory = false;
      options.check_invariants = a.check;
      options.offload = *parse_offload_replay(a.offload);  // the option's check named the three
      options.timeline_points = a.html.empty() ? 0 : 2000;
      options.record_segments = torch;
      // PyTorch's own allocator cannot start from a recorded layout: beside it, the model starts
      // from an empty allocator too, with the same live set, so the two compare like for like.
      if (torch) options.use_recorded_layout = false;
      progress_bar bar(fmt::format("replaying {}", model_spec), !a.quiet);
      options.progress = [&](std::size_t done, std::size_t total) { bar.update(done, total); };
      auto r = replay(t, model_spec, options);
      if (!r) throw command_error(r.error());
      modelled = std::move(r).value();
      report.results.push_back(modelled);
    }
    if (real) {
      if (model) {
        nlohmann::json j;
        divergences += model_spec + ": " + first_divergence(model_segments(modelled), real->segments, j);
        j["policy"] = model_spec;
        divergence_json.push_back(std::move(j));
      }
      report.results.push_back(std::move(real->result));
    }
  }

  std::vector<peak_explanation> explained;
  if (a.explain_peak) {
    if (!model) throw command_error("replay --explain-peak: needs the model engine (--engine model or both)");
    for (const replay_result& r : report.results) {
      if (r.device.rfind("model", 0) != 0) continue;  // PyTorch's own allocator's rows
      replay_options options;
      options.capacity_bytes = *capacity;
      if (a.device == "vmm") options.virtual_memory = true;
      if (a.device == "segments") options.virtual_memory = false;
      if (torch) options.use_recorded_layout = false;
      auto e = explain_peak(t, r.policy, options);
      if (!e) throw command_error(e.error());
      explained.push_back(std::move(e).value());
    }
  }
  if (a.json) {
    nlohmann::json doc = replay_json(report);
    if (model && torch) doc["model_vs_torch"] = std::move(divergence_json);
    if (a.explain_peak) doc["explain_peak"] = peak_explanations_json(explained);
    std::cout << doc.dump(2) << '\n';
  } else {
    std::cout << render_replay_text(report);
    std::cout << render_fidelity_text(report);
    if (!divergences.empty()) std::cout << '\n' << divergences;
    if (!explained.empty()) std::cout << "\nThe mapped bytes that are not allocated, at the peaks:\n";
    for (const peak_explanation& e : explained) std::cout << render_peak_explanation(e);
  }
  if (!a.html.empty()) {
    write_replay_html(a.html, report, invocation);
    if (!a.json) std::cout << "\nreport: " << a.html << '\n';
  }
}

namespace {

/// replay --colocate: every trace on one model device, per policy.
void run_colocated(const replay_args& a) {
  if (!a.source.empty()) {
    throw command_error(fmt::format("replay: '{}' and --colocate: give every trace after --colocate "
                                    "(phasealloc replay --colocate TRACE TRACE ... -p POLICY)",
                                    a.source));
  }
  if (a.colocate.size() < 2) {
    throw command_error(fmt::format("replay --colocate: needs at least two traces, got {}", a.colocate.size()));
  }
  if (!a.html.empty()) throw command_error("replay --colocate: --html is not supported (use --json or the tables)");
  if (a.engine != "model") {
    throw command_error(fmt::format("replay --colocate: --engine {} is not supported (only model)", a.engine));
  }
  const std::size_t capacity_bytes = parse_capacity(a.capacity);
  std::vector<trace> traces;
  colocated_report report;
  report.capacity_bytes = capacity_bytes;
  for (std::size_t p = 0; p < a.colocate.size(); ++p) {
    trace_summary summary;
    auto loaded = load_valid_trace(a.colocate[p], !a.no_validate, input_options(a.recorded_gpu), &summary);
    if (!loaded) {
      throw command_error(fmt::format("replay --colocate: trace {} of {} ('{}'): {}", p + 1, a.colocate.size(),
                                      a.colocate[p], loaded.error()));
    }
    traces.push_back(std::move(loaded).value());
    report.trace_names.push_back(display_name(a.colocate[p]));
    report.events.push_back(traces.back().events.size());
    report.floor_bytes.push_back(summary.peak_live_bytes);
  }
  for (const std::string& spec : a.policies) {
    replay_options options;
    options.capacity_bytes = capacity_bytes;
    if (a.device == "vmm") options.virtual_memory = true;
    if (a.device == "segments") options.virtual_memory = false;
    options.check_invariants = a.check;
    progress_bar bar(fmt::format("replaying {} colocated", spec), !a.quiet);
    options.progress = [&](std::size_t done, std::size_t total) { bar.update(done, total); };
    auto r = replay_colocated(traces, spec, options);
    if (!r) throw command_error(r.error());
    report.results.push_back(std::move(r).value());
  }
  if (a.json) {
    std::cout << colocated_json(report).dump(2) << '\n';
  } else {
    std::cout << render_colocated_text(report);
  }
}

}  // namespace

/// The options replay and report share.
void add_replay_options(CLI::App* cmd, replay_args& args) {
  cmd->add_option("trace", args.source,
                  "trace file (.patrace, text trace, PyTorch snapshot .pickle, Kineto .json, RMM .csv) or synth:JOB")
      ->required();
  cmd->add_option("-p,--policy", args.policies,
                  "policy spec, repeatable: pytorch, pytorch:expandable_segments:True, phasealloc, ...")
      ->required();
  cmd->add_option("-c,--capacity", args.capacity, "model device capacity")->capture_default_str();
  cmd->add_option("--link", args.link,
                  "host link bandwidth for the time of recorded offload copies (bytes per second: 50GB/s is "
                  "PCIe Gen5 x16, 25GB/s Gen4)")
      ->capture_default_str();
  cmd->add_option("--offload", args.offload,
                  "a trace's recorded offload and restore calls (a job under PHASEALLOC_CONF=offload:auto): made as "
                  "recorded, under pressure (offload:pressure: each held until an allocation would run out of "
                  "memory), or none (the job without offload)")
      ->check(CLI::IsMember({"recorded", "pressure", "none"}))
      ->capture_default_str();
  cmd->add_option("--device", args.device,
                  "the model device the replay runs on: auto (by policy: virtual memory when a pool is "
                  "expandable), segments (cudaMalloc-like) or vmm (cuMem virtual memory)")
      ->check(CLI::IsMember({"auto", "segments", "vmm"}))
      ->capture_default_str();
  cmd->add_option("--recorded-gpu", args.recorded_gpu,
                  "the recorded GPU to replay: a snapshot's or profiler trace's device index (default: the "
                  "snapshot's first device with history, the profiler trace's device with the most memory events)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (!v.empty() && v.size() <= 9 && v.find_first_not_of("0123456789") == std::string::npos) return {};
            return "expected a GPU index (0, 1, ...), not '" + v + "'";
          },
          "N"));
  cmd->add_flag("--check", args.check, "run the engine's invariant checker after every event (slow)");
  cmd->add_flag("-q,--quiet", args.quiet, "no progress bar");
  cmd->add_flag("--no-validate", args.no_validate,
                "skip checking the trace before the replay (faster on huge traces; a bad trace then replays as far "
                "as it makes sense)");
}

std::string command_line(std::string_view verb, const replay_args& args) {
  std::string line = fmt::format("phasealloc {} {}", verb, args.source);
  for (const auto& p : args.policies) line += " --policy " + p;
  if (args.capacity != "80GiB") line += " --capacity " + args.capacity;
  return line;
}

void add_replay_command(CLI::App& app) {
  auto args = std::make_shared<replay_args>();
  CLI::App* cmd = app.add_subcommand("replay", "Replay a trace against policies on the model device (phasealloc's model of a GPU's memory), side by side");
  add_replay_options(cmd, *args);
  cmd->add_flag("--json", args->json, "print one JSON document instead of tables");
  cmd->add_option("--html", args->html, "also write a self-contained HTML report to this file");
  cmd->add_option("--engine", args->engine,
                  "model: phasealloc's engine; torch: PyTorch's own allocator on the simulated GPU (pytorch[:KEYS] "
                  "policies; PHASEALLOC_PYTHON names the interpreter with torch); both: side by side, with the first "
                  "segment event where they differ")
      ->check(CLI::IsMember({"model", "torch", "both"}))
      ->capture_default_str();
  cmd->add_option("--colocate", args->colocate,
                  "replay these traces (two or more) as processes on one GPU instead of TRACE: each with its own "
                  "allocator and the policy, all sharing the capacity; events merged by time (ties: trace order)")
      ->expected(1, CLI::detail::expected_max_vector_size);
  cmd->add_flag("--explain-peak", args->explain_peak,
                "after the tables, for each policy on the model engine: at its peak reserved, the mapped bytes that are "
                "not allocated, by pool: in pages shared with live blocks, holes between live pages, and edges next to "
                "unmapped space (replays each policy once more)");
  // TRACE or --colocate: the positional is required unless --colocate names the traces.
  cmd->get_option("trace")->required(false);
  cmd->callback([args] {
    if (!args->colocate.empty()) return run_colocated(*args);
    if (args->source.empty()) throw command_error("replay: a trace is required (TRACE, or --colocate TRACE TRACE ...)");
    run_replay(*args, command_line("replay", *args));
  });
}

}  // namespace phasealloc::cli
