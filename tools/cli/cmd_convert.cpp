// phasealloc convert IN OUT [--text]     any input format -> a phasealloc trace (binary or text)
// phasealloc export  IN OUT.pickle       any input format -> a PyTorch snapshot pickle (memory_viz)
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "phasealloc/import/snapshot_exporter.hpp"
#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "trace_input.hpp"

namespace phasealloc::cli {
namespace {

struct convert_args {
  std::string source;
  std::string output;
  bool text = false;
};

trace load_valid(const std::string& source) {
  auto loaded = load_any_trace(source);
  if (!loaded) throw command_error(loaded.error());
  if (auto v = validate(loaded.value()); !v) throw command_error(fmt::format("{}: {}", source, v.error().message()));
  return std::move(loaded).value();
}

}  // namespace

void add_convert_commands(CLI::App& app) {
  auto convert = std::make_shared<convert_args>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a snapshot, profiler JSON, RMM log or trace to a phasealloc trace");
  cmd->add_option("input", convert->source, "input (any format replay reads, or synth:JOB)")->required();
  cmd->add_option("output", convert->output, "output trace path")->required();
  cmd->add_flag("--text", convert->text, "write the text format (default: binary)");
  cmd->callback([convert] {
    const trace t = load_valid(convert->source);
    auto saved = save_trace(convert->output, t, convert->text ? trace_file_format::text : trace_file_format::binary);
    if (!saved) throw command_error(saved.error().message());
    std::cout << fmt::format("wrote {} ({} events)\n", convert->output, t.events.size());
  });

  auto exported = std::make_shared<convert_args>();
  CLI::App* ex = app.add_subcommand("export", "Write a trace as a PyTorch memory snapshot pickle for memory_viz");
  ex->add_option("input", exported->source, "input (any format replay reads, or synth:JOB)")->required();
  ex->add_option("output", exported->output, "output .pickle path")->required();
  ex->callback([exported] {
    const trace t = load_valid(exported->source);
    auto written = export_snapshot_file(t, exported->output);
    if (!written) throw command_error(written.error().message());
    std::cout << fmt::format("wrote {} (open it at pytorch.org/memory_viz or with torch.cuda._memory_viz)\n",
                             exported->output);
  });
}

}  // namespace phasealloc::cli
