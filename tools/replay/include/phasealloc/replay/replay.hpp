// Replay: run a recorded (or synthesized) trace through the real engine and a policy on the model
// device, and measure what that allocator would have reserved, per phase.
//
// Design note
// Rationale: a replay must predict what the production library does, so it runs the same engine
//   and policies the interpose layer runs, only against the model device. Nothing is re-modelled.
// Approach: each trace event becomes one engine call (alloc -> allocate, free -> deallocate of the
//   id's address, phase -> set_phase, empty_cache, record_stream); segment events of the
//   recording allocator are not followed, only collected for comparison. An allocation that fails
//   (out of memory on the model device's capacity) is counted and its later free skipped.
//   A trace with a recorded layout (seed_block events, trace_format.hpp) seeds the engine with it
//   first (engine::seed) for policies that model the recording allocator (the `pytorch` ones,
//   policy::models_recorded_allocator): the seeded allocations it places are not
//   allocated again; the others (and every seeded allocation for other policies) are allocated by
//   the policy at time 0, in order, as before.
// Limitations: events complete at once on the model device, so cross-stream frees are never
//   pending (the trace has no kernel timing); one device per trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/replay/residency.hpp"
#include "phasealloc/snapshot.hpp"
#include "phasealloc/trace_sink.hpp"
#include "phasealloc/stats.hpp"
#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

/// A modelled (not measured) cost of device calls, for the "estimated allocator time" column:
/// tens of microseconds per cudaMalloc/cudaFree or cuMem call, per 2 MiB page for mapping.
model_device_cost default_replay_cost();

/// What a replay does with a trace's recorded offload and restore calls.
enum class offload_replay {
  recorded,  ///< makes them as recorded (a job under offload:auto, or its own phasealloc.offload calls)
  pressure,  ///< offload:pressure: an offload is held until an allocation runs out (src/pressure_offloads.hpp)
  none,      ///< ignores them: the job without offload
};
/// "recorded", "pressure" or "none".
std::string_view to_string(offload_replay mode) noexcept;
/// The mode named `name`, or nothing.
std::optional<offload_replay> parse_offload_replay(std::string_view name) noexcept;

struct replay_options {
  std::size_t capacity_bytes = 80 * gib;
  std::size_t granularity_bytes = 2 * mib;
  /// Device kind: nullopt = virtual memory iff the policy has an expandable pool (what the
  /// interpose layer's default device choice amounts to for that policy).
  std::optional<bool> virtual_memory;
  model_device_cost cost = default_replay_cost();
  bool check_invariants = false;     ///< Run the engine's checker after every event (slow).
  std::size_t timeline_points = 0;   ///< Keep about this many (time, allocated, reserved) samples.
  bool record_segments = false;      ///< Keep the sizes of the replay's segment allocations.
  /// Sees every engine event with the addresses the policy chose, in order (phasealloc export).
  trace_sink* observer = nullptr;
  /// Filled with the engine's segments and blocks at the end of the trace.
  snapshot* final_state = nullptr;
  /// Filled with the engine's segments and blocks right after the trace event of this index (a
  /// replay is deterministic: a second replay with replay_result::peak_reserved_event here sees
  /// the layout at the peak; peak_explain.hpp).
  std::optional<std::size_t> snapshot_after_event;
  snapshot* event_state = nullptr;
  /// Set to each trace event's time (ns) before the event is replayed, so an observer can stamp
  /// the engine events it causes.
  std::uint64_t* clock_ns = nullptr;
  /// Whether to seed the engine with the trace's recorded layout (seed_block events) before the
  /// replay: nullopt = for a policy that models the recording allocator only
  /// (policy::models_recorded_allocator; the others place the same seeded live set their own way,
  /// as they would have).
  std::optional<bool> use_recorded_layout;
  /// Called now and then with (events done, events total).
  std::function<void(std::size_t, std::size_t)> progress;
  /// The recorded offload and restore calls: made as recorded, under pressure only, or not at all.
  offload_replay offload = offload_replay::recorded;
};

/// One sample of the memory timeline: the maxima over the events it stands for.
struct timeline_point {
  std::size_t event = 0;
  std::uint64_t time_ns = 0;
  std::size_t allocated_bytes = 0;
  std::size_t reserved_bytes = 0;
};

/// A stretch of the trace during which one phase was current.
struct phase_band {
  std::string name;
  std::size_t first_event = 0;
  std::size_t end_event = 0;  ///< One past the last event.
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
};

/// Where the replay's reserved level first differs from the one the trace recorded.
struct reserved_divergence {
  std::size_t event = 0;  ///< Index of the alloc or free event after which they differ.
  std::uint64_t time_ns = 0;
  trace_event_op op = trace_event_op::alloc;
  std::size_t recorded_bytes = 0;
  std::size_t modelled_bytes = 0;
};

/// The replay against what the recording allocator reserved, for traces that carry it (segment
/// events: snapshots; Total Reserved changes: profiler traces). The recorded level at an event is
/// the sum of seeded segments plus the segment events before it; it is compared after every alloc
/// and free, once the engine has served it.
struct recorded_comparison {
  bool available = false;                ///< The trace has segment events (or seeded segments).
  std::size_t recorded_peak_reserved_bytes = 0;
  std::size_t recorded_final_reserved_bytes = 0;
  std::size_t recorded_final_segments = 0;  ///< Segments live at the end of the recording.
  std::optional<reserved_divergence> first_divergence;
  std::optional<reserved_divergence> largest_divergence;  ///< The largest |modelled - recorded|.
};

struct replay_result {
  std::string policy;   ///< The effective spec.
  std::string device;   ///< "model (whole segments)" or "model (virtual memory)".
  /// The allocator replayed is the one the recording was made under (policy::models_recorded_allocator,
  /// or PyTorch's own): its gaps to the recording are errors of fidelity, not savings.
  bool models_recording = false;
  std::size_t capacity_bytes = 0;
  std::size_t events = 0;
  std::size_t peak_reserved_bytes = 0;
  std::size_t peak_allocated_bytes = 0;
  std::size_t peak_requested_bytes = 0;
  /// The first trace event after which the reserved level was the highest seen after any event
  /// (the peak, unless the peak lasted only inside one engine call: then the level after that call).
  std::size_t peak_reserved_event = 0;
  std::size_t peak_reserved_after_event_bytes = 0;  ///< That level.
  /// The same for the allocated level: the event after which the most bytes were allocated.
  std::size_t peak_allocated_event = 0;
  std::size_t peak_allocated_after_event_bytes = 0;
  std::size_t final_reserved_bytes = 0;   ///< At the end of the trace (what a snapshot then shows).
  std::size_t final_allocated_bytes = 0;
  std::size_t final_requested_bytes = 0;
  std::size_t final_segments = 0;         ///< Segments (reservations) held at the end.
  std::int64_t device_allocs = 0;  ///< Segments reserved (cudaMalloc / cuMemAddressReserve).
  std::int64_t device_frees = 0;
  std::int64_t device_maps = 0;
  std::int64_t device_unmaps = 0;
  std::int64_t alloc_retries = 0;
  std::int64_t ooms = 0;           ///< Allocations that failed for lack of memory.
  /// Recorded offload and restore calls made again here (trace version 3): bytes of pages that
  /// left the device and came back, and calls the model refused (a restore without room).
  std::size_t offloaded_bytes = 0;
  std::size_t restored_bytes = 0;
  std::int64_t offload_failures = 0;
  std::string first_offload_failure;  ///< Why the first refused call was refused ("" when none was).
  offload_replay offload_mode = offload_replay::recorded;
  /// Under offload_replay::pressure: recorded offload calls made because an allocation ran out, and
  /// the allocations that then fitted (counted in no OOM figure).
  std::int64_t pressure_calls = 0;
  std::int64_t pressure_relieved = 0;
  std::uint64_t modeled_device_time_ns = 0;
  double wall_seconds = 0;
  std::vector<phase_stats> phases;  ///< Phases that saw any event ("unphased" only if it did).
  /// Reserved while each phase ran (peak, time-weighted mean) and what each transition returned.
  colocation_headroom headroom;
  std::vector<timeline_point> timeline;
  std::vector<phase_band> bands;
  std::vector<std::size_t> segment_alloc_bytes;
  /// With record_segments: every segment event (segment_alloc/free/map/unmap) and its bytes, in order.
  std::vector<std::pair<trace_op, std::size_t>> segment_events;
  recorded_comparison recorded;
  std::size_t seeded_segments = 0;  ///< Segments booked from the recorded layout (0: none used).

  std::int64_t device_calls() const noexcept { return device_allocs + device_frees + device_maps + device_unmaps; }
  /// 1 - peak allocated / peak reserved; 0 when allocated is above reserved (offloaded blocks are
  /// allocated but not reserved) or nothing was reserved.
  double fragmentation() const noexcept {
    return peak_reserved_bytes <= peak_allocated_bytes ? 0.0
                                                       : 1.0 - static_cast<double>(peak_allocated_bytes) /
                                                                   static_cast<double>(peak_reserved_bytes);
  }
};

/// Replays `t` with the policy built from `policy_spec` ("pytorch", "phasealloc:...").
result<replay_result, std::string> replay(const trace& t, std::string_view policy_spec,
                                          const replay_options& options = {});

}  // namespace phasealloc
