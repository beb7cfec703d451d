// The compact binary encoding of a trace (what the recorder writes by default).
//
// Design note
// Rationale: a recording of a long RLHF job holds tens of millions of events; at ~40 bytes in
//   memory each, the file must be several times smaller and cheap to write. Ids are mostly
//   sequential and time deltas small, so varints of deltas make most events 5-8 bytes.
// Approach (version 1; every integer is an unsigned LEB128 varint, "zz" = zigzag of a signed delta):
//     magic "\x89PAT\r\n\x1a\n" (8 bytes; the PNG trick catches text-mode transfers)
//     version, header flags (0)
//     metadata: source, allocator_settings, device_capacity_bytes, stream_count,
//               property count, then key/value pairs          (strings are length + bytes)
//     string count, strings
//     event count, events
//   One event: a head byte = op (low 4 bits) | 0x10 flags byte follows | 0x20 stream follows |
//   0x40 tag follows | 0x80 name follows; then zz(time - previous time), zz(id - predicted id),
//   bytes, and the optional fields in that order. The predicted id is the previous allocation id
//   + 1 for alloc, the previous allocation id for free / record_stream, the same pair for
//   segment ids, and 0 for ops without an id. Nothing may follow the last event.
// Limitations: the reader holds the whole input in memory (it is read once, front to back);
//   no checksum (truncation and trailing bytes are detected, bit flips in a number are not).
//   Hostile input cannot make it allocate more than a small multiple of the input size: every
//   reservation is capped by the bytes that remain.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <variant>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

/// The first 8 bytes of every binary trace.
inline constexpr std::string_view trace_binary_magic{"\x89PAT\r\n\x1a\n", 8};

/// Writes `t` to `out`; the error names `sink_name` when the stream fails.
result<std::monostate, trace_error> write_trace(const trace& t, std::ostream& out,
                                                std::string_view sink_name = "<stream>");
/// The binary encoding of `t` as a string of bytes.
std::string encode_trace(const trace& t);

/// Reads a binary trace; errors name `source_name`, the byte offset and what was expected.
result<trace, trace_error> read_trace(std::istream& in, std::string_view source_name);
/// Decodes a binary trace held in memory.
result<trace, trace_error> decode_trace(std::string_view bytes, std::string_view source_name);

}  // namespace phasealloc
