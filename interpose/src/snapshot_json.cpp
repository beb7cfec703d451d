#include "snapshot_json.hpp"

#include <string_view>

namespace phasealloc::interpose {
namespace {

std::string_view torch_state(block_state state) {
  switch (state) {
    case block_state::allocated: return "active_allocated";
    case block_state::pending_free: return "active_pending_free";
    case block_state::free: return "inactive";
    case block_state::unmapped: return "unmapped";  // never written: unmapped blocks are left out
  }
  return "inactive";
}

nlohmann::json start_segment(const snapshot_segment& seg, device_address addr, int ordinal) {
  return {
      {"device", ordinal},
      {"address", addr},
      {"total_size", 0},
      {"allocated_size", 0},
      {"active_size", 0},
      {"requested_size", 0},
      {"stream", seg.stream},
      {"segment_type", seg.small ? "small" : "large"},
      {"segment_pool_id", nlohmann::json::array({0, 0})},
      {"is_expandable", seg.expandable},
      {"frames", nlohmann::json::array()},
      {"pool", seg.pool},
      {"blocks", nlohmann::json::array()},
  };
}

}  // namespace

void append_snapshot_segments(const snapshot& snap, int ordinal, nlohmann::json& out) {
  for (const snapshot_segment& seg : snap.segments) {
    nlohmann::json current;  // null while outside a mapped run
    std::size_t total = 0, allocated = 0, active = 0, requested = 0;
    const auto close = [&] {
      if (current.is_null()) return;
      current["total_size"] = total;
      current["allocated_size"] = allocated;
      current["active_size"] = active;
      current["requested_size"] = requested;
      out.push_back(std::move(current));
      current = nullptr;
      total = allocated = active = requested = 0;
    };
    for (const snapshot_block& b : seg.blocks) {
      if (b.state == block_state::unmapped) {
        close();
        continue;
      }
      if (current.is_null()) current = start_segment(seg, b.addr, ordinal);
      const bool is_active = b.state == block_state::allocated || b.state == block_state::pending_free;
      total += b.bytes;
      if (b.state == block_state::allocated) allocated += b.bytes;
      if (is_active) {
        active += b.bytes;
        requested += b.requested_bytes;
      }
      current["blocks"].push_back({
          {"address", b.addr},
          {"size", b.bytes},
          {"requested_size", is_active ? b.requested_bytes : 0},
          {"state", std::string(torch_state(b.state))},
          {"frames", nlohmann::json::array()},
      });
    }
    close();
  }
}

}  // namespace phasealloc::interpose
