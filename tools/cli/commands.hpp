// The `phasealloc` subcommands; each cmd_<name>.cpp adds the one of its name to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace phasealloc::cli {

void add_replay_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_policies_command(CLI::App& app);
void add_dryrun_command(CLI::App& app);

/// Thrown by a command to end with a message and exit status 1 (tools may throw; the engine never does).
struct command_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Thrown by a command that has said everything and ends with `status` (dryrun: the job's own
/// non-zero exit status).
struct command_exit {
  int status = 0;
};

}  // namespace phasealloc::cli
