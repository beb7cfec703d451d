#include "phasealloc/export/placed_segments.hpp"

namespace phasealloc {
namespace {

const char* torch_state(block_state s) {
  switch (s) {
    case block_state::allocated: return "active_allocated";
    case block_state::pending_free: return "active_pending_free";
    default: return "inactive";
  }
}

}  // namespace

std::vector<placed_segment> placed_segments(const snapshot& state) {
  std::vector<placed_segment> out;
  for (const snapshot_segment& seg : state.segments) {
    bool open = false;  // inside a mapped run
    for (const snapshot_block& b : seg.blocks) {
      if (b.state == block_state::unmapped) {  // a hole in the reservation: the run ends here
        open = false;
        continue;
      }
      if (!open) {
        out.push_back(placed_segment{b.addr, seg.stream, seg.small, seg.expandable, seg.pool, {}});
        open = true;
      }
      const bool active = b.state == block_state::allocated || b.state == block_state::pending_free;
      out.back().blocks.push_back({b.addr, b.bytes, active ? b.requested_bytes : 0, torch_state(b.state)});
    }
  }
  return out;
}

}  // namespace phasealloc
