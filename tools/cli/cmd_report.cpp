// phasealloc report TRACE --policy SPEC [--policy SPEC ...] -o FILE.html [--capacity 80GiB]
//     replay's run, written as a self-contained HTML report.
#include "commands.hpp"
#include "replay_command.hpp"

namespace phasealloc::cli {

void add_report_command(CLI::App& app) {
  auto report = std::make_shared<replay_args>();
  CLI::App* rep = app.add_subcommand("report", "Replay a trace against policies and write a self-contained HTML report");
  add_replay_options(rep, *report);
  rep->add_option("-o,--output", report->html, "the HTML file to write")->required();
  rep->callback([report] { run_replay(*report, command_line("report", *report)); });
}

}  // namespace phasealloc::cli
