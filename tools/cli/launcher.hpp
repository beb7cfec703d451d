// Finding phasealloc-run, the launcher that runs a command with phasealloc swapped in or on the
// simulated GPU (replay --engine torch, dryrun), and quoting for the shell it is started through.
#pragma once

#include <string>

namespace phasealloc::cli {

/// phasealloc-run: PHASEALLOC_RUN, beside this executable (installed), or in the source tree of a
/// build-tree executable (build folder's phasealloc-source-tree file; no path is compiled in).
/// Throws command_error naming PHASEALLOC_RUN when there is none.
std::string find_launcher(const char* what);

/// `s` in single quotes for /bin/sh.
std::string shell_quote(const std::string& s);

/// interpose/python of the source tree, prepended to PYTHONPATH, for a build-tree CLI only (it runs
/// the package from there); "" for an installed CLI, whose package is installed, wherever it was built.
std::string source_python_path();

}  // namespace phasealloc::cli
