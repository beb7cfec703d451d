#include "stats_json.hpp"

#include <string_view>

#include "interpose_config.hpp"

namespace phasealloc::interpose {

nlohmann::json host_pool_to_json(const host_pool_stats& s) {
  nlohmann::json out = nlohmann::json::object();
  const auto put = [&](std::string_view name, const stat& value) {
    const std::string prefix(name);
    out[prefix + ".current"] = value.current;
    out[prefix + ".peak"] = value.peak;
    out[prefix + ".allocated"] = value.allocated;
    out[prefix + ".freed"] = value.freed;
  };
  put("allocations", s.allocations);
  put("allocated_bytes", s.allocated_bytes);
  put("active_requests", s.active_requests);
  put("active_bytes", s.active_bytes);
  out["num_host_alloc"] = s.num_host_alloc;
  out["num_host_free"] = s.num_host_free;
  out["num_reuses"] = s.num_reuses;
  out["num_waits"] = s.num_waits;
  out["num_over_budget"] = s.num_over_budget;
  out["budget_bytes"] = s.budget_bytes;
  return out;
}

nlohmann::json phase_to_json(const phase_stats& p) {
  return {
      {"name", p.name},
      {"intervals", p.intervals},
      {"peak_allocated_bytes", p.peak_allocated_bytes},
      {"peak_reserved_bytes", p.peak_reserved_bytes},
      {"peak_active_bytes", p.peak_active_bytes},
      {"peak_requested_bytes", p.peak_requested_bytes},
      {"reserved_unallocated_at_peak_bytes", p.reserved_unallocated_at_peak_bytes},
      {"largest_free_block_at_peak_bytes", p.largest_free_block_at_peak_bytes},
      {"num_allocs", p.num_allocs},
      {"num_frees", p.num_frees},
      {"num_device_alloc", p.num_device_alloc},
      {"num_device_free", p.num_device_free},
      {"num_device_map", p.num_device_map},
      {"num_device_unmap", p.num_device_unmap},
      {"num_alloc_retries", p.num_alloc_retries},
      {"num_ooms", p.num_ooms},
      {"released_bytes", p.released_bytes},
      {"offloaded_bytes", p.offloaded_bytes},
      {"restored_bytes", p.restored_bytes},
      {"fragmentation", p.fragmentation()},
  };
}

nlohmann::json stats_to_json(const device_slot* slot, int ordinal, std::int64_t interpose_misuse,
                             int torch_device_count) {
  nlohmann::json out = nlohmann::json::object();
  const device_stats stats = slot != nullptr ? slot->eng->stats() : device_stats{};
  for (const auto& [key, value] : to_memory_stats(stats)) out[key] = value;

  nlohmann::json phases = nlohmann::json::array();
  nlohmann::json info = {{"device_index", ordinal}, {"engine", slot != nullptr}, {"interpose_misuse", interpose_misuse},
                         {"torch_device_count", torch_device_count}};
  if (slot != nullptr) {
    for (const phase_stats& p : slot->eng->phases()) phases.push_back(phase_to_json(p));
    const device_caps& caps = slot->dev->caps();
    const misuse_report misuse = slot->eng->last_misuse();
    info["device"] = std::string(slot->dev->name());
    info["policy"] = slot->eng->current_policy().spec();
    info["current_phase"] = slot->eng->current_phase();
    info["limit_bytes"] = slot->eng->limit_bytes();
    info["capacity_bytes"] = caps.capacity_bytes;
    info["granularity_bytes"] = caps.granularity_bytes;
    info["device_free_bytes"] = slot->dev->free_bytes();
    info["last_misuse"] = misuse.code == errc::ok ? nlohmann::json(nullptr)
                                                  : nlohmann::json{{"code", std::string(to_string(misuse.code))},
                                                                   {"message", misuse.message}};
  }
  out["phases"] = std::move(phases);
  out["phasealloc"] = std::move(info);
  if (slot != nullptr) {
    out["host"] = host_pool_to_json(slot->host.stats());
  } else {
    const auto& config = process_config();
    out["host"] = host_pool_to_json(empty_host_pool_stats(config ? config.value().host_budget_bytes : 0));
  }
  return out;
}

}  // namespace phasealloc::interpose
