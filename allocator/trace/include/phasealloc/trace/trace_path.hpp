// Per-process trace file names: every rank of a torchrun job (or Ray actor) writes its own file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace phasealloc {

struct trace_path_context {
  std::int64_t pid = 0;
  std::int64_t rank = 0;
};

/// This process: getpid(), and the rank from RANK, else LOCAL_RANK, else 0 (values that are not
/// non-negative integers are skipped).
trace_path_context current_trace_path_context();

/// Replaces %p with the pid, %r with the rank and %% with %; any other '%' is kept as written.
/// "trace.%r.%p.patrace" -> "trace.3.41234.patrace".
std::string expand_trace_path(std::string_view pattern, const trace_path_context& context);
std::string expand_trace_path(std::string_view pattern);

}  // namespace phasealloc
