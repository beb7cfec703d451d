// Reading a whole input into memory: the one reader every trace, snapshot, profiler and log loader
// uses (the trace codecs, tools/import's importers, the CLI's trace input).
//
// Design note
// Rationale: the decoders parse bytes in memory, once; reading a 125 MB trace through an
//   istreambuf_iterator copy cost a third of a second.
// Approach: one buffer sized from fstat, filled by read(2) (a file that grows meanwhile is read
//   to its end). Not mapped: a mapped file truncated by another process while it is read faults
//   (SIGBUS) instead of giving an error; mapping saved about 0.07 s of 1.75 s on a 17 M-event
//   trace, not worth a crash. A stream (std::istream) is read to its end through its buffer.
// Limitations: a file changed while it is read may be seen half old, half new.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"

namespace phasealloc {

/// The bytes of the file at `path`. The error names the file; `found` is the system's reason
/// ("No such file or directory", ...) or "a read error".
result<std::string, trace_error> read_file_bytes(const std::filesystem::path& path);

/// Everything left in `in`; the error names `source_name`.
result<std::string, trace_error> read_stream_bytes(std::istream& in, std::string_view source_name);

}  // namespace phasealloc
