// Growing: asking the device for more memory when no cached block fits (engine.cpp calls grow()).
//
// Design note
// Rationale: growth is where the engine meets the device and the policy's release plans; keeping
//   it apart from the allocate/free bookkeeping keeps both readable.
// Approach: grow = before_grow plan -> one try (a new segment sized by the policy, or pages mapped
//   into the pool's expandable reservation, as many as map_ahead_bytes asks beyond the need) ->
//   on_oom plan, one retry after each step -> else an alloc_error with the OOM report.
//   An expandable pool has one reservation per (pool, stream), sized to the device's capacity
//   plus an eighth (as PyTorch's expandable segments); growth maps the lowest unmapped run that,
//   with the free block before it, holds the request.
// Limitations: a failed map_ahead falls back to mapping only the need; nothing smarter.
#include <algorithm>

#include "engine_impl.hpp"
#include "phasealloc/check.hpp"

namespace phasealloc::detail {

grow_context engine_impl::make_grow_context(const alloc_request& request, pool_id pool, std::size_t rounded,
                                            std::size_t grow_bytes) const {
  grow_context c;
  c.request = request;
  c.rounded_bytes = rounded;
  c.pool = pool;
  c.grow_bytes = grow_bytes;
  c.reserved_bytes = static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current);
  c.allocated_bytes = static_cast<std::size_t>(stats_.allocated_bytes[stat_type::all].current);
  c.capacity_bytes = device_.caps().capacity_bytes;
  c.limit_bytes = options_.limit_bytes;
  return c;
}

block* engine_impl::grow(const alloc_request& request, pool_id pool, std::size_t rounded, alloc_error& error) {
  const std::size_t planned = pool_traits_[pool].expandable
                                  ? round_up(rounded, pool_traits_[pool].page_bytes)
                                  : round_up(policy_.segment_bytes(pool, rounded), device_.caps().granularity_bytes);
  const release_plan before = policy_.before_grow(make_grow_context(request, pool, rounded, planned));
  if (!before.empty()) run_plan(before);

  std::size_t grow_bytes = 0;
  if (block* b = try_grow_once(request, pool, rounded, grow_bytes)) return b;

  const release_plan plan = policy_.on_oom(make_grow_context(request, pool, rounded, grow_bytes));
  const auto accept = [&](const block* c) { return policy_.may_use(pool, c->bytes, rounded); };
  for (const release_step& step : plan) {
    const std::size_t released = run_step(step);
    if (step.require_target && released < step.target_bytes) continue;
    // A step that waited for pending frees may have made a fitting block free.
    block* b = pools_[pool].best_fit(request.stream, rounded, accept);
    if (b != nullptr) {
      pools_[pool].erase(b);
    } else {
      b = try_grow_once(request, pool, rounded, grow_bytes);
    }
    if (b != nullptr) {
      ++stats_.num_alloc_retries;
      ++phases_.current_stats().num_alloc_retries;
      return b;
    }
  }

  ++stats_.num_ooms;
  ++phases_.current_stats().num_ooms;
  emit(trace_op::oom, 0, request.requested_bytes, rounded, request.stream, request.tag);
  error.code = errc::out_of_memory;
  oom_report& r = error.report;
  r.requested_bytes = request.requested_bytes;
  r.rounded_bytes = rounded;
  r.grow_bytes = grow_bytes;
  r.capacity_bytes = device_.caps().capacity_bytes;
  r.limit_bytes = options_.limit_bytes;
  r.device_free_bytes = device_.free_bytes();
  r.allocated_bytes = static_cast<std::size_t>(stats_.allocated_bytes[stat_type::all].current);
  r.reserved_bytes = static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current);
  r.largest_free_block_bytes = largest_free_bytes();
  r.device_failure = device_.last_failure();
  r.pool = pool_traits_[pool].name;
  r.phase = phases_.name(phases_.current());
  r.phases = phases_.all();
  return nullptr;
}

block* engine_impl::try_grow_once(const alloc_request& request, pool_id pool, std::size_t rounded,
                                  std::size_t& grow_bytes) {
  if (pool_traits_[pool].expandable) return grow_expandable(request, pool, rounded, grow_bytes);
  const std::size_t bytes = round_up(policy_.segment_bytes(pool, rounded), device_.caps().granularity_bytes);
  PHASEALLOC_CHECK(bytes >= rounded, "policy '{}' sized a segment of {} for a {}-byte block", policy_.spec(), bytes,
                   rounded);
  grow_bytes = bytes;
  const auto reserved = static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current);
  if (options_.limit_bytes != 0 && reserved + bytes > options_.limit_bytes) return nullptr;
  return new_segment(pool, request.stream, bytes);
}

block* engine_impl::new_segment(pool_id pool, stream_id stream, std::size_t bytes) {
  const bool virtual_reserve = device_.caps().has_virtual_reserve;
  const result<device_address> addr = device_.reserve(bytes);
  if (!addr) return nullptr;
  count_device(&device_stats::num_device_alloc, &phase_stats::num_device_alloc);
  if (virtual_reserve) {
    const errc mapped = device_.map(addr.value(), bytes);
    count_device(&device_stats::num_device_map, &phase_stats::num_device_map);
    if (mapped != errc::ok) {
      (void)device_.release(addr.value(), bytes);
      count_device(&device_stats::num_device_free, &phase_stats::num_device_free);
      return nullptr;
    }
  }
  segment* seg = add_segment(addr.value(), bytes, pool, stream, /*expandable=*/false);
  emit(trace_op::segment_alloc, seg->addr, bytes, bytes, stream);
  return seg->first;
}

segment* engine_impl::add_segment(device_address addr, std::size_t bytes, pool_id pool, stream_id stream,
                                  bool expandable) {
  auto owned = std::make_unique<segment>();
  segment* seg = owned.get();
  seg->addr = addr;
  seg->bytes = bytes;
  seg->mapped_bytes = expandable ? 0 : bytes;  // an expandable reservation starts with no memory
  seg->pool = pool;
  seg->stream = stream;
  seg->expandable = expandable;
  seg->small = is_small(pool);
  block* b = arena_.make();
  b->addr = addr;
  b->bytes = bytes;
  b->seg = seg;
  b->state = expandable ? block_state::unmapped : block_state::free;
  seg->first = b;
  stats_.segment.increase(seg->small, 1);
  stats_.reserved_bytes.increase(seg->small, static_cast<std::int64_t>(seg->mapped_bytes));
  segments_.emplace(addr, std::move(owned));
  return seg;
}

segment* engine_impl::expandable_segment_for(pool_id pool, stream_id stream) {
  const auto key = std::make_pair(pool, stream);
  if (const auto it = expandable_.find(key); it != expandable_.end()) return it->second;
  // Address space for the whole device (and an eighth more, as PyTorch reserves), so the
  // reservation never has to move; memory is mapped page by page as blocks need it.
  const std::size_t page = pool_traits_[pool].page_bytes;
  const std::size_t bytes = round_up(device_.caps().capacity_bytes + device_.caps().capacity_bytes / 8, page);
  const result<device_address> addr = device_.reserve(bytes);
  if (!addr) return nullptr;
  count_device(&device_stats::num_device_alloc, &phase_stats::num_device_alloc);
  segment* raw = add_segment(addr.value(), bytes, pool, stream, /*expandable=*/true);
  expandable_.emplace(key, raw);
  return raw;
}

block* engine_impl::grow_expandable(const alloc_request& request, pool_id pool, std::size_t rounded,
                                    std::size_t& grow_bytes) {
  const stream_id stream = request.stream;
  segment* seg = expandable_segment_for(pool, stream);
  if (seg == nullptr) return nullptr;
  const std::size_t page = pool_traits_[pool].page_bytes;
  // The lowest-address unmapped run that, with the free block just before it, holds the request:
  // map only the pages the request lacks.
  for (block* u = seg->first; u != nullptr; u = u->next) {
    if (u->state != block_state::unmapped) continue;
    block* f = u->prev;
    if (f != nullptr && (f->state != block_state::free || f->event_count != 0)) f = nullptr;
    const std::size_t have = f != nullptr ? f->bytes : 0;
    if (have + u->bytes < rounded) continue;
    const std::size_t need = round_up(rounded - std::min(rounded, have), page);
    grow_bytes = need;
    if (need == 0) continue;  // cannot happen: f alone would have fitted in best_fit
    const auto reserved = static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current);
    if (options_.limit_bytes != 0 && reserved + need > options_.limit_bytes) return nullptr;
    // Map ahead as far as the policy asks when there is room: one call now saves the next few.
    const std::size_t ahead = policy_.map_ahead_bytes(make_grow_context(request, pool, rounded, need));
    std::size_t map_bytes = std::min(u->bytes, std::max(need, round_up(ahead, page)));
    if (options_.limit_bytes != 0 && reserved + map_bytes > options_.limit_bytes) map_bytes = need;
    errc mapped = device_.map(u->addr, map_bytes);
    count_device(&device_stats::num_device_map, &phase_stats::num_device_map);
    if (mapped != errc::ok && map_bytes > need) {  // no room to map ahead: map what is needed
      map_bytes = need;
      mapped = device_.map(u->addr, need);
      count_device(&device_stats::num_device_map, &phase_stats::num_device_map);
    }
    if (mapped != errc::ok) return nullptr;
    block* m = map_bytes < u->bytes ? split_front(u, map_bytes) : u;
    m->state = block_state::free;
    seg->mapped_bytes += map_bytes;
    stats_.reserved_bytes.increase(seg->small, static_cast<std::int64_t>(map_bytes));
    emit(trace_op::segment_map, m->addr, map_bytes, map_bytes, stream);
    return merge_neighbours(m);  // absorbs f, taking it out of the pool
  }
  grow_bytes = round_up(rounded, page);
  return nullptr;
}

}  // namespace phasealloc::detail
