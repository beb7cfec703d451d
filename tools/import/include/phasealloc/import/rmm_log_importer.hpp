// RMM logging_resource_adaptor CSV -> trace.
//
// Design note
// Rationale: RAPIDS users record with rmm's logging adaptor; its own replay matches frees by raw
//   pointer and parses the stream column in the wrong base (style-anchors.md, rmm "Avoid"). Here
//   pointers become allocation ids and the stream column is read as the hex it is written in.
// Approach: the header "Thread,Time,Action,Pointer,Size,Stream" (optional; columns in that order).
//   Time is "%H:%M:%S.%f" (any number of fraction digits) or seconds with a fraction; a clock that
//   goes back by more than 12 hours is taken as midnight passing. Action "allocate" -> alloc,
//   "allocate failure" -> oom, "free" (or "deallocate") -> free. Pointer and Stream are hex, with
//   or without "0x" ("(nil)" is 0). Streams become ordinals in order of first sight. Frees of
//   pointers never allocated are seeded (import_builder.hpp); allocations that returned a null
//   pointer are skipped and counted ("rmm.null_allocations").
// Limitations: the thread column is ignored (ordering is the file's); sizes are what the adaptor
//   saw, which may already be aligned by the layers above it.
#pragma once

#include <filesystem>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

result<trace, trace_error> import_rmm_log(std::string_view csv_text, std::string_view source_name);
result<trace, trace_error> import_rmm_log_file(const std::filesystem::path& path);

}  // namespace phasealloc
