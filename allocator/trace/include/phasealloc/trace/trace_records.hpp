// The records encoding of a trace: what programs in other languages read, with nothing to parse
// beyond JSON and fixed-width little-endian records. phasealloc.torch_replay (the oracle driver,
// PyTorch's own allocator on the simulated GPU) reads it; C++ writes it, never reads it.
//
// Design note
// Rationale: the text and binary encodings have a grammar (tokens, quoting, varints of deltas);
//   a second reader of either in Python would be a second parser to keep in step with the one
//   here. The oracle path (`phasealloc replay --engine torch`) used to hand the driver a text
//   trace, which Python tokenized again. Measured on tools/data/ppo-125m.patrace (400,798 events;
//   CPU seconds, 2-core machine under load): C++ writing the text 0.08, Python parsing it 0.92,
//   importing torch and starting simcuda 0.9, the replay loop 1.7: the driver took 3.75 s, a
//   quarter of it reading. The same events as JSON lists read in 0.3-0.4 s; as these records in
//   0.10 (struct.iter_unpack), and the driver takes 2.9 s. Writing them takes 0.01-0.04 s. A pipe
//   instead of a file would save nothing measurable and would not serve the driver run alone on
//   a GPU machine (bench/gpu/device_run.sh), which reads a file.
// Approach (version 1):
//     line 1: one JSON object, UTF-8, ending in '\n', that describes the rest:
//       {"format": "phasealloc-trace-records", "version": 1, "trace_version": V, "events": N,
//        "record_bytes": 40, "record": "<BBxxIQQQII",
//        "fields": ["op", "flags", "stream", "time_ns", "alloc_id", "bytes", "tag", "name"],
//        "ops": ["alloc", "free", ...],       the op names, indexed by the op field
//        "strings": [...],                    trace::strings (phase names), indexed by `name`
//        "meta": {"source", "allocator_settings", "device_capacity_bytes", "stream_count",
//                 "properties": [[key, value], ...]}}
//     then N records of record_bytes each, one per event in order, nothing after:
//       offset 0 op u8 | 1 flags u8 | 2 zero u16 | 4 stream u32 | 8 time_ns u64 | 16 alloc_id u64 |
//       24 bytes u64 | 32 tag u32 | 36 name u32, all little-endian: trace_event's fields.
//   "record" is the layout in Python's struct notation and "fields" names its values, so a reader
//   looks fields up by name and a later version may add fields at the end. A reader checks format,
//   version and that the body is exactly events * record_bytes long.
// Limitations: write-only in C++ (phasealloc reads traces in the binary or text encoding; convert
//   a trace again rather than a records file); strings must be valid UTF-8 (JSON), else the writer
//   returns an error naming the string; about as large as the text encoding (40 bytes an event).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <variant>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

/// The "format" value of the header line.
inline constexpr std::string_view trace_records_format = "phasealloc-trace-records";
/// The version this build writes.
inline constexpr std::uint32_t trace_records_version = 1;
/// Bytes of one event record (version 1).
inline constexpr std::size_t trace_records_record_bytes = 40;

/// Writes `t` as records to `out`; the error names `sink_name` (a stream failure) or the string
/// that is not valid UTF-8.
result<std::monostate, trace_error> write_trace_records(const trace& t, std::ostream& out,
                                                        std::string_view sink_name = "<stream>");

}  // namespace phasealloc
