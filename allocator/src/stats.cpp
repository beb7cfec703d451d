#include "phasealloc/stats.hpp"

#include <string_view>

namespace phasealloc {

std::vector<std::pair<std::string, std::int64_t>> to_memory_stats(const device_stats& s) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  const auto add_array = [&](std::string_view name, const stat_array& a) {
    static constexpr std::string_view types[] = {"all", "small_pool", "large_pool"};
    for (std::size_t t = 0; t < stat_type_count; ++t) {
      const stat& st = a.by_type[t];
      const std::string prefix = std::string(name) + "." + std::string(types[t]) + ".";
      out.emplace_back(prefix + "current", st.current);
      out.emplace_back(prefix + "peak", st.peak);
      out.emplace_back(prefix + "allocated", st.allocated);
      out.emplace_back(prefix + "freed", st.freed);
    }
  };
  add_array("active", s.active);
  add_array("active_bytes", s.active_bytes);
  add_array("allocated_bytes", s.allocated_bytes);
  add_array("allocation", s.allocation);
  add_array("inactive_split", s.inactive_split);
  add_array("inactive_split_bytes", s.inactive_split_bytes);
  add_array("offloaded_bytes", s.offloaded_bytes);
  add_array("requested_bytes", s.requested_bytes);
  add_array("reserved_bytes", s.reserved_bytes);
  add_array("segment", s.segment);
  out.emplace_back("num_alloc_retries", s.num_alloc_retries);
  out.emplace_back("num_ooms", s.num_ooms);
  out.emplace_back("num_sync_all_streams", s.num_sync_all_streams);
  out.emplace_back("num_device_alloc", s.num_device_alloc);
  out.emplace_back("num_device_free", s.num_device_free);
  out.emplace_back("num_device_map", s.num_device_map);
  out.emplace_back("num_device_unmap", s.num_device_unmap);
  out.emplace_back("num_misuse", s.num_misuse);
  out.emplace_back("oversize_allocations.current", s.oversize_allocations);
  out.emplace_back("oversize_segments.current", s.oversize_segments);
  out.emplace_back("num_offloads", s.num_offloads);
  out.emplace_back("num_restores", s.num_restores);
  out.emplace_back("num_restore_ooms", s.num_restore_ooms);
  out.emplace_back("offload_kept_bytes", s.offload_kept_bytes);
  return out;
}

}  // namespace phasealloc
