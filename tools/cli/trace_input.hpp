// Loads a trace from whatever the user points at: a phasealloc trace (binary or text), a PyTorch
// memory snapshot pickle, a PyTorch profiler (Kineto) JSON, an RMM log CSV, or "synth:<job>" for
// a synthesized RLHF trace (e.g. "synth:ppo-1.3b" or "synth:preset:ppo-7b,batch:8"), any of the
// files gzip-compressed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_format.hpp"
#include "phasealloc/trace/trace_summary.hpp"

namespace phasealloc::cli {

/// What to take from a file that holds more than one device (snapshots, profiler traces).
struct trace_input_options {
  /// The recorded device (GPU index) to import; default: the importer's choice (a snapshot's first
  /// device with history, a profiler trace's device with the most memory events).
  std::optional<std::uint32_t> device;
};

/// Errors name the source and what is wrong: not a regular file (and what it is instead), 0 bytes,
/// or the reader's error (file, offset, what was expected). Gzip-compressed files (PyTorch's
/// profiler writes .json.gz) are decompressed first, whatever their kind. A trace with no events is
/// returned (dryrun replays every process's recording); `empty_error`, when given, is then set to
/// what it is ("'x.csv' is an RMM log with no allocations or frees: nothing to replay").
result<trace, std::string> load_any_trace(std::string_view source, std::string* empty_error = nullptr,
                                          const trace_input_options& options = {});

/// load_any_trace; an error for a trace with no events; then (when `check`) validate(): the error
/// names the first bad event. replay, report, sweep, export and convert run only traces that pass
/// (their --no-validate skips the validation). `summary`, when given, is set to summarize() of the
/// trace, from the validation's own pass when `check`.
result<trace, std::string> load_valid_trace(std::string_view source, bool check = true,
                                            const trace_input_options& options = {},
                                            trace_summary* summary = nullptr);

/// Decompresses gzip (or zlib) data into `out`. Returns "" or an error naming `name`: corrupt or
/// truncated data, or output above `max_output_bytes` (a decompression bomb).
std::string gunzip(std::string_view compressed, std::string_view name, std::string& out,
                   std::size_t max_output_bytes = std::size_t{16} << 30);

/// A short display name for a source (the file name, or the synth spec).
std::string display_name(std::string_view source);

}  // namespace phasealloc::cli
