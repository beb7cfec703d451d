// Runs a user's job as a child process and waits for it, calling back while it runs (phasealloc
// dryrun's progress line).
//
// Design note
// Rationale: a dry run can take minutes; the user must see that the job is alive, and the job's own
//   output must pass through untouched.
// Approach: posix_spawnp with the parent's stdio and environment plus `env` entries (replacing
//   same-named ones); waitpid(WNOHANG) every `poll_ms`, calling `alive(elapsed_seconds)` between.
// Limitations: the job shares the terminal's process group, so Ctrl-C reaches it too, as it would
//   without phasealloc.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace phasealloc::cli {

struct job_result {
  int exit_status = 0;  ///< The exit code, or 128 + signal number when a signal ended it.
  bool signaled = false;
  double seconds = 0.0;
};

/// Throws command_error when the program cannot be started. `stdout_to_stderr`: the job's standard
/// output goes to our standard error (ours carries a JSON document).
job_result run_job(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                   const std::function<void(double)>& alive, bool stdout_to_stderr = false, int poll_ms = 250);

}  // namespace phasealloc::cli
