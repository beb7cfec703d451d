#include "snapshot_json.hpp"

#include <string>

namespace phasealloc::interpose {

void append_snapshot_segments(const snapshot& snap, int ordinal, nlohmann::json& out) {
  for (const snapshot_run& run : mapped_runs(snap)) {
    const snapshot_segment& seg = *run.segment;
    nlohmann::json blocks = nlohmann::json::array();
    for (const snapshot_block& b : run.blocks) {
      const bool is_active = b.state == block_state::allocated || b.state == block_state::pending_free;
      nlohmann::json block = {
          {"address", b.addr},
          {"size", b.bytes},
          {"requested_size", is_active ? b.requested_bytes : 0},
          {"state", std::string(torch_block_state(b.state))},
          {"frames", nlohmann::json::array()},
      };
      if (b.offloaded) block["offloaded"] = true;  // phasealloc's key: its pages are host memory now
      blocks.push_back(std::move(block));
    }
    out.push_back({
        {"device", ordinal},
        {"address", run.blocks.front().addr},
        {"total_size", run.total_bytes},
        {"allocated_size", run.allocated_bytes},
        {"active_size", run.active_bytes},
        {"requested_size", run.requested_bytes},
        {"stream", seg.stream},
        {"segment_type", seg.small ? "small" : "large"},
        {"segment_pool_id", nlohmann::json::array({0, 0})},
        {"is_expandable", seg.expandable},
        {"frames", nlohmann::json::array()},
        {"pool", seg.pool},
        {"blocks", std::move(blocks)},
    });
  }
}

}  // namespace phasealloc::interpose
