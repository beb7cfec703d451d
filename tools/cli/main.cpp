// phasealloc: the command-line tool. One binary, one subcommand per task.
#include <cstdio>
#include <iostream>

#include "commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"phasealloc: replay, compare and tune GPU allocator policies for RLHF jobs, without a GPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "phasealloc 0.1.0");
  phasealloc::cli::add_replay_command(app);
  phasealloc::cli::add_report_command(app);
  phasealloc::cli::add_sweep_command(app);
  phasealloc::cli::add_tune_command(app);
  phasealloc::cli::add_inspect_command(app);
  phasealloc::cli::add_convert_command(app);
  phasealloc::cli::add_export_command(app);
  phasealloc::cli::add_synth_command(app);
  phasealloc::cli::add_policies_command(app);
  phasealloc::cli::add_dryrun_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const phasealloc::cli::command_exit& e) {
    return e.status;
  } catch (const phasealloc::cli::command_error& e) {
    std::fprintf(stderr, "phasealloc: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "phasealloc: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
