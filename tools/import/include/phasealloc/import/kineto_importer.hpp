// PyTorch profiler (Kineto) Chrome-trace JSON with profile_memory=True -> trace.
//
// Design note
// Rationale: many users have profiler traces but no memory snapshot. Their "[memory]" instant
//   events carry every allocation and free the caching allocator reported.
// Approach: events named "[memory]" whose args say "Device Type" 1 (CUDA) and the chosen
//   "Device Id" become alloc (Bytes > 0) or free (Bytes < 0) of "Addr"; "[OutOfMemory]" events
//   become oom. The device is options.device_id, else the CUDA device with the most memory events
//   (the lowest id among equals); "kineto.devices" lists every CUDA device and its event count,
//   "kineto.device_choice" says how the device was chosen. Events are ordered by "ts"
//   (microseconds, fractional allowed; ties keep file order); time is ts x 1000 relative to the
//   first. Frees of addresses never allocated are seeded (import_builder.hpp).
//   Baseline: the first event's "Total Allocated" less its own change is what was live before
//   profiling began ("kineto.baseline_bytes"); what the seeded frees do not account for becomes one
//   more seeded allocation, live to the end ("kineto.baseline_unattributed_bytes"), so a replay's
//   floor and its reserved memory start where the job's did.
//   Reserved as recorded: the first event's "Total Reserved" is a seeded segment_alloc and every
//   later change of it a segment_map (growth) or segment_unmap (release) just before the event
//   that reports it, so summarize() and a replay see the recorded reserved level at every event;
//   "recorded.reserved_at_start_bytes", "recorded.peak_reserved_bytes" and
//   "recorded.reserved_at_end_bytes" hold its start, peak and end ("kineto.peak_total_*" are kept).
//   The JSON is parsed with a callback that drops every other event as soon as it is read, so a
//   large trace costs little memory. The device's "totalGlobalMem" from "deviceProperties" becomes
//   meta.device_capacity_bytes.
// Limitations: the profiler reports the allocator's block size (already rounded, e.g. to 512 B),
//   not the requested size, and no stream: every event is on stream 0. Reserved memory has no
//   segment boundaries: the segment events stand for changes of "Total Reserved", not for segments
//   (a growth in the first event is part of the seeded start). The baseline is one block: how it
//   was split among tensors is unknown. A negative "Total Allocated" or "Total Reserved", or a
//   negative "Bytes" on an "[OutOfMemory]" event, is an error; errors about a field name the
//   memory event (its index among memory events), not a byte offset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

struct kineto_import_options {
  std::optional<std::int64_t> device_id;  ///< CUDA device index; default: the one with the most memory events.
};

result<trace, trace_error> import_kineto(std::string_view json_text, std::string_view source_name,
                                         const kineto_import_options& options = {});
result<trace, trace_error> import_kineto_file(const std::filesystem::path& path,
                                              const kineto_import_options& options = {});

}  // namespace phasealloc
