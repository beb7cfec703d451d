// phasealloc synth JOB -o OUT [--text] | --list
// JOB is a preset name or a preset with overrides: "ppo-1.3b" or "preset:ppo-7b,batch:8,iterations:2".
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "phasealloc/oom_report.hpp"
#include "phasealloc/synth/synth.hpp"
#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_summary.hpp"

namespace phasealloc::cli {
namespace {

struct synth_args {
  std::string job;
  std::string output;
  bool text = false;
  bool list = false;
};

}  // namespace

void add_synth_command(CLI::App& app) {
  auto args = std::make_shared<synth_args>();
  CLI::App* cmd = app.add_subcommand("synth", "Synthesize a multi-iteration RLHF PPO trace from a model description");
  cmd->add_option("job", args->job, "preset name, or preset:NAME,key:value,... overrides");
  cmd->add_option("-o,--output", args->output, "output trace path");
  cmd->add_flag("--text", args->text, "write the text format (default: binary)");
  cmd->add_flag("--list", args->list, "list the presets");
  cmd->callback([args] {
    if (args->list) {
      for (std::string_view p : preset_names()) std::cout << p << '\n';
      return;
    }
    if (args->job.empty() || args->output.empty()) throw command_error("synth needs a JOB and -o OUTPUT (or --list)");
    auto job = parse_job(args->job);
    if (!job) throw command_error(job.error());
    auto t = synthesize(job.value());
    if (!t) throw command_error(t.error());
    auto saved = save_trace(args->output, t.value(), args->text ? trace_file_format::text : trace_file_format::binary);
    if (!saved) throw command_error(saved.error().message());
    const trace_summary s = summarize(t.value());
    std::cout << fmt::format("wrote {}: {} events, peak live bytes {}\n", args->output, s.events,
                             format_bytes(s.peak_live_bytes));
  });
}

}  // namespace phasealloc::cli
