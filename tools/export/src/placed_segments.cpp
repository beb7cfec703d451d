#include "phasealloc/export/placed_segments.hpp"

namespace phasealloc {

std::vector<placed_segment> placed_segments(const snapshot& state) {
  std::vector<placed_segment> out;
  for (const snapshot_run& run : mapped_runs(state)) {
    const snapshot_segment& seg = *run.segment;
    placed_segment& s = out.emplace_back(
        placed_segment{run.blocks.front().addr, seg.stream, seg.small, seg.expandable, seg.pool, {}});
    for (const snapshot_block& b : run.blocks) {
      const bool active = b.state == block_state::allocated || b.state == block_state::pending_free;
      s.blocks.push_back({b.addr, b.bytes, active ? b.requested_bytes : 0, std::string(torch_block_state(b.state))});
    }
  }
  return out;
}

}  // namespace phasealloc
