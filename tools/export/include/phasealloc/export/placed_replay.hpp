// phasealloc export --policy SPEC: replay a trace with a policy and keep the layout it placed, as
// a PyTorch memory snapshot (segments at the end of the trace, and the device trace).
//
// Design note
// Rationale: an export memory_viz can use must show real segments: what the chosen allocator
//   would have reserved, and where each block lay inside them. The replay is the only place that
//   knows, so the export is a replay with two observers, not a re-derivation.
// Approach: replay() runs the trace with a torch_trace_recorder as its observer (engine events
//   with addresses, stamped with the replayed event's time) and takes the engine's snapshot at
//   the end (placed_segments). Before returning, the layout is checked against the replay: the
//   segments' bytes and the bytes the segment entries add up to must both equal the replay's
//   final reserved bytes, else the export is refused with the three numbers (a broken invariant,
//   never a silently wrong picture).
// Limitations: one device; times are the trace's, at microsecond resolution; see
//   torch_trace_recorder.hpp and placed_segments.hpp.
#pragma once

#include <string>
#include <string_view>

#include "phasealloc/export/placed_snapshot_exporter.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

struct placed_replay {
  replay_result result;    ///< The replay's numbers, as `phasealloc replay` reports them.
  placed_snapshot layout;  ///< What to write with export_placed_snapshot.
};

/// Replays `t` under `policy_spec` (the grammar of `phasealloc replay --policy`). `options` is
/// used as given except its observer, final_state and clock_ns. Fails with a message naming the
/// policy when the spec is not valid.
result<placed_replay, std::string> replay_placed(const trace& t, std::string_view policy_spec,
                                                 replay_options options = {});

}  // namespace phasealloc
