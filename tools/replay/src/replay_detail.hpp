// What replay() and replay_colocated() share: the model device a policy replays on, the
// id -> address book of a trace's allocations and the trace's recorded layout as engine seed
// segments. Internal to phasealloc::replay.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "phasealloc/engine.hpp"
#include "phasealloc/policy.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc::replay_detail {

/// Virtual memory as the options say, else when one of the policy's pools is expandable.
inline bool wants_virtual_memory(const policy& pol, const replay_options& options) {
  if (options.virtual_memory) return *options.virtual_memory;
  for (const pool_traits& p : pol.pools()) {
    if (p.expandable) return true;
  }
  return false;
}

/// The model device of a replay: the options' capacity, granularity and cost model, events
/// complete at once, no spinning for modelled time.
inline model_device_config replay_device_config(const replay_options& options, bool virtual_memory) {
  model_device_config device_config;
  device_config.capacity_bytes = options.capacity_bytes;
  device_config.granularity_bytes = options.granularity_bytes;
  device_config.virtual_memory = virtual_memory;
  device_config.host_backing = virtual_memory;  // a recorded offload moves pages to the host here too
  device_config.events_complete_immediately = true;
  device_config.cost = options.cost;
  device_config.cost.spin = false;
  return device_config;
}

/// Alloc id -> address: a vector when ids are dense (the usual case), a hash map otherwise.
class address_book {
 public:
  explicit address_book(const trace& t) {
    std::uint64_t max_id = 0;
    for (const trace_event& e : t.events) {
      if (e.op == trace_event_op::alloc) max_id = std::max(max_id, e.alloc_id);
    }
    dense_ = max_id < 4 * t.events.size() + 1024;
    if (dense_) by_id_.assign(max_id + 1, 0);
  }
  void set(std::uint64_t id, device_address a) {
    if (dense_) by_id_[id] = a;
    else sparse_[id] = a;
  }
  /// 0 when the id has no live address (never allocated here, or its allocation failed).
  device_address take(std::uint64_t id) {
    if (dense_) {
      if (id >= by_id_.size()) return 0;
      return std::exchange(by_id_[id], 0);
    }
    const auto it = sparse_.find(id);
    if (it == sparse_.end()) return 0;
    const device_address a = it->second;
    sparse_.erase(it);
    return a;
  }
  device_address peek(std::uint64_t id) const {
    if (dense_) return id < by_id_.size() ? by_id_[id] : 0;
    const auto it = sparse_.find(id);
    return it == sparse_.end() ? 0 : it->second;
  }

 private:
  bool dense_ = true;
  std::vector<device_address> by_id_;
  std::unordered_map<std::uint64_t, device_address> sparse_;
};

/// The trace's recorded layout as engine seed segments, with the allocation id of each allocated
/// block in order (the ids the engine's returned addresses belong to).
inline std::vector<seed_segment> recorded_layout(const trace& t, std::vector<std::uint64_t>& allocated_ids) {
  std::vector<seed_segment> out;
  std::unordered_map<std::uint64_t, std::uint64_t> requested;  // seeded allocation id -> bytes
  bool any_block = false;
  for (const trace_event& e : t.events) {
    if ((e.flags & trace_flag::seeded) == 0) break;
    if (e.op == trace_event_op::alloc) requested[e.alloc_id] = e.bytes;
    any_block = any_block || e.op == trace_event_op::seed_block;
  }
  if (!any_block) return out;
  bool open = false;
  for (const trace_event& e : t.events) {
    if ((e.flags & trace_flag::seeded) == 0) break;
    if (e.op == trace_event_op::segment_alloc) {
      open = false;
      seed_segment s;
      s.stream = e.stream;
      s.small = (e.flags & trace_flag::small_pool) != 0;
      s.expandable = (e.flags & trace_flag::expandable) != 0;
      out.push_back(std::move(s));
      open = true;
    } else if (e.op == trace_event_op::seed_block && open) {
      seed_block b;
      b.bytes = e.bytes;
      if ((e.flags & trace_flag::allocated) != 0) {
        b.state = block_state::allocated;
        b.requested_bytes = requested[e.alloc_id];
        allocated_ids.push_back(e.alloc_id);
      } else {
        b.state = (e.flags & trace_flag::unmapped) != 0 ? block_state::unmapped : block_state::free;
      }
      out.back().blocks.push_back(b);
    }
  }
  // A seeded segment with no blocks (a baseline known by its size only) is not part of the layout.
  std::erase_if(out, [](const seed_segment& s) { return s.blocks.empty(); });
  return out;
}

}  // namespace phasealloc::replay_detail
