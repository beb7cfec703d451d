// PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot()` pickles) -> trace.
//
// Design note
// Rationale: snapshots are what PyTorch users already have. Their device_traces hold the caller's
//   allocations and frees (what a replay must follow) and the native allocator's own device calls
//   (segment_alloc / segment_free: what a faithful replica of its policy must reproduce).
// Approach:
//   - Layouts: current (segments, device_traces, allocator_settings; blocks with requested_size and
//     state), 2.0-era (segments + device_traces; blocks with `history`), and a bare list (segments
//     only: the trace is just the blocks live at the end, seeded).
//   - One device: options.device, else the first device whose trace is not empty.
//   - Actions: alloc -> alloc (size as recorded: the requested size); free_requested -> free (the
//     caller's free; free_completed, which comes later when other streams still used the block, is
//     not an event: "pytorch.deferred_frees" counts the frees that did not complete at once, so a
//     replay that completes every free at once knows how far it may be off); segment_alloc / segment_free / segment_map / segment_unmap -> the segment ops;
//     oom -> oom; snapshot and anything else -> ignored. Streams become ordinals; time is time_us
//     x 1000 relative to the first entry (0 throughout when the snapshot has no time_us).
//   - Mid-run snapshots: frees of addresses never allocated in the trace, and blocks that are
//     active_allocated in `segments` but not live at the end of the trace, become seeded
//     allocations at time 0; segments likewise become seeded segment_allocs (import_builder.hpp).
//     With options.recorded_layout (the default), the segments live when the history began and
//     their blocks (start_layout.hpp: the end state with the history undone) become the trace's
//     recorded layout: seeded segment_allocs flagged with their pool and expandability, each
//     followed by its seed_block events (trace_format.hpp), so the `pytorch` model starts from the
//     recorded segments; "import.layout" says whether it was used and why not. A state-only
//     snapshot is all layout. A block that overlaps the one before it or leaves its segment is an
//     error naming it (segments[i]['blocks'][j]).
//   - Recorded levels: "recorded.segments_at_end" (segments of the device in `segments`) and
//     "snapshot.start" (how the history begins) for the replay's fidelity report.
//   - Phases: when any entry carries `user_metadata`, an entry whose user_metadata differs from
//     the current one starts a phase of that name. Otherwise, with phase_rules, the first frame
//     (innermost first) whose name or filename contains a rule's substring names the phase (first
//     matching rule wins; entries with no matching frame keep the current phase). Otherwise none.
//   - Metadata: allocator_settings is PYTORCH_CUDA_ALLOC_CONF as recorded; every scalar of
//     allocator_settings is kept as a property "pytorch.<key>"; "import.reserved_at_end_bytes" is
//     the device's total of segment sizes in `segments`. summarize() (trace_summary.hpp) gives the
//     peak reserved implied by the segment events.
// Limitations: the snapshot's ring buffer (max_entries) may have dropped old entries; what it
//   dropped is seen as "mid-run" and seeded. Stack frames are not kept in the trace.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/import/pickle_document.hpp"
#include "phasealloc/import/pickle_reader.hpp"
#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

struct phase_rule {
  std::string phase;            ///< Phase name to start.
  std::string frame_substring;  ///< Matched against each frame's name and filename.
};

struct snapshot_import_options {
  std::optional<std::uint32_t> device;  ///< Default: the first device with trace entries.
  std::vector<phase_rule> phase_rules;  ///< Used only when no entry carries user_metadata.
  /// Write the allocator's layout when the history began (start_layout.hpp) into the trace as
  /// seed_block events (a version 2 trace) when any segment was live then. Off: seeded segments and
  /// allocations only, as version 1 did.
  bool recorded_layout = true;
  pickle_limits limits;
};

result<trace, trace_error> import_snapshot(const pickle_document& doc, std::string_view source_name,
                                           const snapshot_import_options& options = {});
/// Reads the pickle bytes, then imports.
result<trace, trace_error> import_snapshot(std::string_view pickle_bytes, std::string_view source_name,
                                           const snapshot_import_options& options = {});
result<trace, trace_error> import_snapshot_file(const std::filesystem::path& path,
                                                const snapshot_import_options& options = {});

}  // namespace phasealloc
