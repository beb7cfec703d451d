// The human-readable, diffable encoding of a trace.
//
//   # phasealloc-trace v1
//   source "pytorch snapshot cs336_mem_snapshot.pickle"
//   allocator_settings ""
//   device_capacity_bytes 0
//   stream_count 1
//   property "pytorch.layout" "current"
//   string 0 "training"
//   # t_ns op alloc_id bytes stream tag name flags
//   0 alloc 0 2097152 0 0 0 -
//   1302000 phase 0 0 0 0 0 -  # training
//   1304000 free 0 2097152 0 0 0 -
//
// The first line names the version. Header lines (source, allocator_settings,
// device_capacity_bytes, stream_count, property, string) come before the events; `string` lines
// give their index, which must count up from 0. An event line has eight columns (the flags column,
// "-" or "seeded", may be left out). '#' starts a comment outside quotes; blank lines are ignored.
// Strings are double-quoted with \" \\ \n \r \t \xHH escapes. Errors name the line.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <variant>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

/// The first bytes of every text trace (followed by " v<version>").
inline constexpr std::string_view trace_text_header = "# phasealloc-trace";

result<std::monostate, trace_error> write_trace_text(const trace& t, std::ostream& out,
                                                     std::string_view sink_name = "<stream>");
std::string format_trace_text(const trace& t);

result<trace, trace_error> read_trace_text(std::istream& in, std::string_view source_name);
result<trace, trace_error> parse_trace_text(std::string_view text, std::string_view source_name);

}  // namespace phasealloc
