#include "phasealloc/snapshot.hpp"

namespace phasealloc {

std::vector<snapshot_run> mapped_runs(const snapshot& snap) {
  std::vector<snapshot_run> out;
  for (const snapshot_segment& seg : snap.segments) {
    const std::vector<snapshot_block>& blocks = seg.blocks;
    std::size_t k = 0;
    while (k < blocks.size()) {
      if (blocks[k].state == block_state::unmapped) {  // a hole in the reservation: no run here
        ++k;
        continue;
      }
      snapshot_run run;
      run.segment = &seg;
      const std::size_t first = k;
      for (; k < blocks.size() && blocks[k].state != block_state::unmapped; ++k) {
        const snapshot_block& b = blocks[k];
        run.total_bytes += b.bytes;
        if (b.state == block_state::allocated) run.allocated_bytes += b.bytes;
        if (b.state == block_state::allocated || b.state == block_state::pending_free) {
          run.active_bytes += b.bytes;
          run.requested_bytes += b.requested_bytes;
        }
      }
      run.blocks = std::span<const snapshot_block>(blocks.data() + first, k - first);
      out.push_back(run);
    }
  }
  return out;
}

std::string_view torch_block_state(block_state state) noexcept {
  switch (state) {
    case block_state::allocated: return "active_allocated";
    case block_state::pending_free: return "active_pending_free";
    case block_state::free:
    case block_state::offloaded_free: return "inactive";
    case block_state::unmapped: return "unmapped";
  }
  return "inactive";
}

}  // namespace phasealloc
