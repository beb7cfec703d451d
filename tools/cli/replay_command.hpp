// What `replay` (cmd_replay.cpp) and `report` (cmd_report.cpp) share: their arguments, their common
// options, and the run of one trace against policies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

namespace phasealloc::cli {

struct replay_args {
  std::string source;
  std::vector<std::string> policies;
  std::string capacity = "80GiB";
  std::string link = "50GB/s";        ///< Host link bandwidth of the modelled offload copies (PCIe Gen5 x16).
  std::string offload = "recorded";   ///< The recorded offload calls: recorded, pressure or none.
  std::string device = "auto";        ///< The model device: auto, segments or vmm.
  std::optional<std::uint32_t> recorded_gpu;  ///< The recorded GPU to import (snapshot, profiler trace).
  bool json = false;
  std::string html;
  bool check = false;
  bool quiet = false;
  bool no_validate = false;
  std::string engine = "model";
  std::vector<std::string> colocate;  ///< replay --colocate: the processes' traces
  bool explain_peak = false;  ///< replay --explain-peak: what the mapped bytes at each model policy's peak hold
};

/// The options replay and report share (trace, policies, capacity, device, recorded GPU, check, quiet).
void add_replay_options(CLI::App* cmd, replay_args& args);
/// "phasealloc VERB TRACE --policy ..." for a report's header.
std::string command_line(std::string_view verb, const replay_args& args);
/// Replays one trace against every policy and prints (or writes) the result.
void run_replay(const replay_args& a, const std::string& invocation);

}  // namespace phasealloc::cli
