// Traces on disk: load either encoding (sniffed from the first bytes), save either, or save the
// records that programs in other languages read (trace_records.hpp).
#pragma once

#include <filesystem>
#include <string_view>
#include <variant>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

enum class trace_file_format { binary, text, records };

/// Loads a binary trace (magic "\x89PAT...") or a text trace ("# phasealloc-trace v1").
result<trace, trace_error> load_trace(const std::filesystem::path& path);

/// Decodes in-memory bytes of either encoding; `source_name` labels errors.
result<trace, trace_error> load_trace_bytes(std::string_view bytes, std::string_view source_name);

/// Writes `t` to `path` through a temporary file in the same folder that is then renamed, so a
/// crash never leaves half a trace under the final name.
result<std::monostate, trace_error> save_trace(const std::filesystem::path& path, const trace& t,
                                               trace_file_format format = trace_file_format::binary);

/// The format a path's extension suggests: ".txt" / ".trace.txt" / ".patrace.txt" are text,
/// anything else binary.
trace_file_format format_for_path(const std::filesystem::path& path);

}  // namespace phasealloc
