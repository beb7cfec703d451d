// Replays of several policy specs over several traces, on a pool of threads: what `sweep` and
// `tune` share. One replay per task (spec, trace); each thread takes the next task until none is
// left; the first error stops the others and is returned. A progress bar (drawn only on a tty)
// follows the replays done.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "phasealloc/replay/replay.hpp"
#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc::cli {

/// results[s][t]: spec s replayed on trace t. `jobs` threads at most (at least 1); `label` names
/// the work on the progress bar, shown when `progress` is set.
result<std::vector<std::vector<replay_result>>, std::string> replay_grid(const std::vector<trace>& traces,
                                                                         const std::vector<std::string>& specs,
                                                                         const replay_options& options,
                                                                         std::size_t jobs, const std::string& label,
                                                                         bool progress);

}  // namespace phasealloc::cli
