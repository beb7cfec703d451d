// trace -> PyTorch memory snapshot pickle, so PyTorch's own memory_viz (pytorch.org/memory_viz,
// torch/cuda/_memory_viz.py trace_plot / segment_plot) can draw our traces and replays.
//
// Design note
// Rationale: memory_viz is what PyTorch users already read; exporting to it costs one function.
// Approach: the current layout: {"segments": [...], "device_traces": [[...]] (device + 1 lists),
//   "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": meta.allocator_settings},
//   "external_annotations": []}. alloc -> {"action": "alloc", "addr", "size", "stream",
//   "time_us", "frames": []}; free -> "free_requested" then "free_completed" (memory_viz pairs
//   them into one free); oom -> {"action": "oom", "size", "device_free": 0, ...}. When the trace
//   has phases, every entry carries "user_metadata" = the current phase, which import_snapshot
//   reads back as phases.
//   Addresses: traces are address-free, so an address is needed per allocation. By default they
//   are synthesized by a bump allocator (each allocation gets a fresh, 512-byte-aligned range that
//   is never reused): memory_viz pairs frees with allocs by address, and unique addresses make
//   that pairing exact whatever the trace. A replay that knows where its allocator put each block
//   passes `alloc_addresses` (indexed by allocation id) and the picture shows its real layout.
//   `segments` holds one synthetic segment covering every address used, whose blocks are the
//   allocations live at the end (plus inactive gaps), so the "Allocator State History" view has a
//   segment for every block it draws.
// Limitations: observed segment events, record_stream and empty_cache are not exported (the
//   synthetic layout has no segments of the recording allocator); seeded allocations are exported
//   as ordinary allocations at time 0; no stack frames.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <variant>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

struct snapshot_export_options {
  std::uint32_t device = 0;                     ///< Index of the device trace to fill.
  std::span<const std::uint64_t> alloc_addresses;  ///< Per allocation id; empty = synthesize.
};

/// The snapshot pickle bytes. Fails when the trace does not validate or an address is missing.
result<std::string, trace_error> export_snapshot(const trace& t, const snapshot_export_options& options = {});
result<std::monostate, trace_error> export_snapshot_file(const trace& t, const std::filesystem::path& path,
                                                         const snapshot_export_options& options = {});

}  // namespace phasealloc
