// PyTorch profiler (Kineto) Chrome-trace JSON with profile_memory=True -> trace.
//
// Design note
// Rationale: many users have profiler traces but no memory snapshot. Their "[memory]" instant
//   events carry every allocation and free the caching allocator reported.
// Approach: events named "[memory]" whose args say "Device Type" 1 (CUDA) and the chosen
//   "Device Id" (default: the first CUDA device seen) become alloc (Bytes > 0) or free (Bytes < 0)
//   of "Addr"; "[OutOfMemory]" events become oom. Events are ordered by "ts" (microseconds,
//   fractional allowed; ties keep file order); time is ts x 1000 relative to the first. Frees of
//   addresses never allocated are seeded (import_builder.hpp). The JSON is parsed with a callback
//   that drops every other event as soon as it is read, so a large trace costs little memory.
//   The peaks of "Total Allocated" and "Total Reserved" go into properties
//   "kineto.peak_total_allocated_bytes" and "kineto.peak_total_reserved_bytes"; the device's
//   "totalGlobalMem" from "deviceProperties" becomes meta.device_capacity_bytes.
// Limitations: the profiler reports the allocator's block size (already rounded, e.g. to 512 B),
//   not the requested size, and no stream: every event is on stream 0. No segment events: reserved
//   memory is only known through the "Total Reserved" peak. Errors about a field name the memory
//   event (its index among memory events), not a byte offset.
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
  std::optional<std::int64_t> device_id;  ///< CUDA device index; default: the first one seen.
};

result<trace, trace_error> import_kineto(std::string_view json_text, std::string_view source_name,
                                         const kineto_import_options& options = {});
result<trace, trace_error> import_kineto_file(const std::filesystem::path& path,
                                              const kineto_import_options& options = {});

}  // namespace phasealloc
