#include "books.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include "phasealloc_c_api.h"

namespace phasealloc::c10_bridge {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingDeviceAllocator::BlockInfo;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::SegmentInfo;

nlohmann::json call_json(const char* text, std::string_view what) {
  TORCH_CHECK(text != nullptr, "phasealloc: ", what, " failed: ", phasealloc_last_error());
  return nlohmann::json::parse(text);
}

std::int64_t number(const nlohmann::json& object, const std::string& key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<std::int64_t>() : 0;
}

Stat read_stat(const nlohmann::json& object, const std::string& prefix) {
  Stat s;
  s.current = number(object, prefix + ".current");
  s.peak = number(object, prefix + ".peak");
  s.allocated = number(object, prefix + ".allocated");
  s.freed = number(object, prefix + ".freed");
  return s;
}

StatArray read_stat_array(const nlohmann::json& object, const std::string& name) {
  static constexpr std::array<const char*, 3> pools = {"all", "small_pool", "large_pool"};
  StatArray out;
  for (std::size_t i = 0; i < pools.size(); ++i) out[i] = read_stat(object, name + "." + pools[i]);
  return out;
}

void add_stat(Stat& into, const Stat& more) {
  into.current += more.current;
  into.peak += more.peak;  // an upper bound: the two peaks need not coincide
  into.allocated += more.allocated;
  into.freed += more.freed;
}

void add_array(StatArray& into, const StatArray& more) {
  for (std::size_t i = 0; i < into.size(); ++i) add_stat(into[i], more[i]);
}

}  // namespace

DeviceStats engine_stats(c10::DeviceIndex device) {
  const nlohmann::json j = call_json(phasealloc_stats_json(device), "stats");
  DeviceStats s;
  s.allocation = read_stat_array(j, "allocation");
  s.segment = read_stat_array(j, "segment");
  s.active = read_stat_array(j, "active");
  s.inactive_split = read_stat_array(j, "inactive_split");
  s.allocated_bytes = read_stat_array(j, "allocated_bytes");
  s.reserved_bytes = read_stat_array(j, "reserved_bytes");
  s.active_bytes = read_stat_array(j, "active_bytes");
  s.inactive_split_bytes = read_stat_array(j, "inactive_split_bytes");
  s.requested_bytes = read_stat_array(j, "requested_bytes");
  s.num_alloc_retries = number(j, "num_alloc_retries");
  s.num_ooms = number(j, "num_ooms");
  s.oversize_allocations = read_stat(j, "oversize_allocations");
  s.oversize_segments = read_stat(j, "oversize_segments");
  if (j.contains("oversize_allocations.current") && !j.contains("oversize_allocations.peak")) {
    s.oversize_allocations.peak = s.oversize_allocations.current;
  }
  if (j.contains("oversize_segments.current") && !j.contains("oversize_segments.peak")) {
    s.oversize_segments.peak = s.oversize_segments.current;
  }
  s.num_sync_all_streams = number(j, "num_sync_all_streams");
  s.num_device_alloc = number(j, "num_device_alloc");
  s.num_device_free = number(j, "num_device_free");
  s.max_split_size = j.contains("max_split_size") ? number(j, "max_split_size") : -1;
  return s;
}

void add_stats(DeviceStats& into, const DeviceStats& more) {
  add_array(into.allocation, more.allocation);
  add_array(into.segment, more.segment);
  add_array(into.active, more.active);
  add_array(into.inactive_split, more.inactive_split);
  add_array(into.allocated_bytes, more.allocated_bytes);
  add_array(into.reserved_bytes, more.reserved_bytes);
  add_array(into.active_bytes, more.active_bytes);
  add_array(into.inactive_split_bytes, more.inactive_split_bytes);
  add_array(into.requested_bytes, more.requested_bytes);
#if PHASEALLOC_TORCH_HAS_PRIVATE_POOL_RESERVED
  for (const auto& [pool, stats] : more.reserved_bytes_by_private_pools) into.reserved_bytes_by_private_pools[pool] = stats;
#endif
  into.num_alloc_retries += more.num_alloc_retries;
  into.num_ooms += more.num_ooms;
  add_stat(into.oversize_allocations, more.oversize_allocations);
  add_stat(into.oversize_segments, more.oversize_segments);
  into.num_sync_all_streams += more.num_sync_all_streams;
  into.num_device_alloc += more.num_device_alloc;
  into.num_device_free += more.num_device_free;
#if PHASEALLOC_TORCH_HAS_OOM_REJECTION_STAT
  into.num_oom_rejections += more.num_oom_rejections;
#endif
}

std::vector<SegmentInfo> engine_segments() {
  const nlohmann::json segments = call_json(phasealloc_snapshot_json(-1), "snapshot");
  std::vector<SegmentInfo> out;
  out.reserve(segments.size());
  for (const nlohmann::json& seg : segments) {
    SegmentInfo info;
    info.device = static_cast<c10::DeviceIndex>(number(seg, "device"));
    info.address = static_cast<std::size_t>(number(seg, "address"));
    info.total_size = static_cast<std::size_t>(number(seg, "total_size"));
    info.requested_size = static_cast<std::size_t>(number(seg, "requested_size"));
    info.allocated_size = static_cast<std::size_t>(number(seg, "allocated_size"));
    info.active_size = static_cast<std::size_t>(number(seg, "active_size"));
    info.stream = reinterpret_cast<void*>(static_cast<std::uintptr_t>(number(seg, "stream")));
    info.is_large = seg.value("segment_type", std::string("large")) != "small";
    info.is_expandable = seg.value("is_expandable", false);
    for (const nlohmann::json& b : seg.at("blocks")) {
      BlockInfo block;
      block.size = static_cast<std::size_t>(number(b, "size"));
      block.requested_size = static_cast<std::size_t>(number(b, "requested_size"));
      const std::string state = b.value("state", std::string("inactive"));
      block.allocated = state == "active_allocated";
      block.active = block.allocated || state == "active_pending_free";
      info.blocks.push_back(block);
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::size_t engine_largest_free_block(c10::DeviceIndex device) {
  const nlohmann::json segments = call_json(phasealloc_snapshot_json(device), "snapshot");
  std::size_t largest = 0;
  for (const nlohmann::json& seg : segments) {
    for (const nlohmann::json& b : seg.at("blocks")) {
      if (b.value("state", std::string()) == "inactive") {
        largest = std::max(largest, static_cast<std::size_t>(number(b, "size")));
      }
    }
  }
  return largest;
}

}  // namespace phasealloc::c10_bridge
