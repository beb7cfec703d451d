// phasealloc convert IN OUT [--text|--records]   any input format -> a phasealloc trace (binary or
// text), or the records that python -m phasealloc.torch_replay reads (trace_records.hpp)
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "trace_input.hpp"

namespace phasealloc::cli {
namespace {

struct convert_args {
  std::string source;
  std::string output;
  bool text = false;
  bool records = false;
};

}  // namespace

void add_convert_command(CLI::App& app) {
  auto convert = std::make_shared<convert_args>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a snapshot, profiler JSON, RMM log or trace to a phasealloc trace");
  cmd->add_option("input", convert->source, "input (any format replay reads, or synth:JOB)")->required();
  cmd->add_option("output", convert->output, "output trace path")->required();
  CLI::Option* text = cmd->add_flag("--text", convert->text, "write the text format (default: binary)");
  cmd->add_flag("--records", convert->records,
                "write the records python -m phasealloc.torch_replay reads (PyTorch's allocator replaying the trace)")
      ->excludes(text);
  cmd->callback([convert] {
    auto loaded = load_valid_trace(convert->source, /*check=*/true);
    if (!loaded) throw command_error(loaded.error());
    const trace& t = loaded.value();
    const trace_file_format format = convert->text      ? trace_file_format::text
                                     : convert->records ? trace_file_format::records
                                                        : trace_file_format::binary;
    auto saved = save_trace(convert->output, t, format);
    if (!saved) throw command_error(saved.error().message());
    std::cout << fmt::format("wrote {} ({} events)\n", convert->output, t.events.size());
  });
}

}  // namespace phasealloc::cli
