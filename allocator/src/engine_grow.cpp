// Growing: asking the device for more memory when no cached block fits (engine.cpp calls grow()).
//
// Design note
// Rationale: growth is where the engine meets the device and the policy's release plans; keeping
//   it apart from the allocate/free bookkeeping keeps both readable.
// Approach: grow = before_grow plan -> one try (a new segment sized by the policy, or pages mapped
//   into the pool's expandable reservation, as many as map_ahead_bytes asks beyond the need) ->
//   on_oom plan, one retry after each step -> else an alloc_error with the OOM report.
//   An expandable pool has a reservation per (pool, stream), sized to the device's capacity plus
//   an eighth, so that another is rarely needed. Growth takes the lowest-address unmapped run
//   that, with the free block before it (and, by the pool's growth style, the chain of free and
//   unmapped blocks after it), holds the request, and maps the runs from there in address order
//   until the merged block does. When no run can, a further reservation is made: at once, or by
//   the rules only as the last resort once the on_oom plan failed (live blocks sit in the holes).
//   The memory limit is checked per map, or by the rules once per growth against the policy's
//   segment size. The policy picks the style (policy.hpp, growth_style); the path is one.
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
  forget_policy_answers();  // before_grow and on_oom may change what the policy answers
  const std::size_t planned = pool_traits_[pool].expandable
                                  ? round_up(rounded, pool_traits_[pool].page_bytes)
                                  : round_up(policy_.segment_bytes(pool, rounded), device_.caps().granularity_bytes);
  const release_plan before = policy_.before_grow(make_grow_context(request, pool, rounded, planned));
  if (!before.empty()) run_plan(before);

  std::size_t grow_bytes = 0;
  land_moves_quietly(/*wait=*/false);  // offloads whose copies are done give their pages back first
  if (block* b = try_grow_once(request, pool, rounded, grow_bytes)) return b;
  if (moves_in_flight_ != 0) {  // offloads still copying free their pages once done: wait for them
    land_moves_quietly(/*wait=*/true);
    if (block* b = try_grow_once(request, pool, rounded, grow_bytes)) return b;
  }

  const release_plan plan = policy_.on_oom(make_grow_context(request, pool, rounded, grow_bytes));
  const auto accept = [&](const block* c) { return policy_.may_use(pool, c->bytes, rounded); };
  for (const release_step& step : plan) {
    const std::size_t released = run_step(step);
    if (step.retry.only_if_target_met && released < step.target_bytes) continue;
    if (step.retry.counted) {
      ++stats_.num_alloc_retries;
      ++phases_.current_stats().num_alloc_retries;
    }
    // A step that waited for pending frees may have made a fitting block free.
    block* b = step.retry.search_pool_first
                   ? pools_[pool].best_fit(request.stream, rounded, accept,
                                           pool_traits_[pool].growth == growth_style::expandable_segments)
                   : nullptr;
    if (b != nullptr) {
      pools_[pool].erase(b);
    } else {
      b = try_grow_once(request, pool, rounded, grow_bytes);
    }
    if (b != nullptr) return b;
  }
  // Last resort for an expandable pool: the device has the memory but no reservation of this pool
  // and stream has a run of addresses long enough (its holes are where live blocks sit). A new
  // reservation holds the request. (With growth_style::expandable_segments one was tried already.)
  if (pool_traits_[pool].expandable && pool_traits_[pool].growth != growth_style::expandable_segments) {
    if (block* b = grow_expandable(request, pool, rounded, grow_bytes, /*new_reservation=*/true)) return b;
  }

  ++stats_.num_ooms;
  ++phases_.current_stats().num_ooms;
  emit(trace_op::oom, 0, request.requested_bytes, rounded, request.stream, request.tag);
  fill_oom_report(request, pool_traits_[pool].name, rounded, grow_bytes, error);
  return nullptr;
}

void engine_impl::fill_oom_report(const alloc_request& request, std::string_view pool_name, std::size_t rounded,
                                  std::size_t grow_bytes, alloc_error& error) const {
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
  r.pool = std::string(pool_name);
  r.phase = phases_.name(phases_.current());
  r.phases = phases_.all();
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
  observe_levels(/*settled=*/false);
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
  ++segments_made_;
  // PyTorch 2.15 numbers each cudaMalloc and expandable reservation, and its blocks inherit it.
  seg->age_rank = pool_traits_[pool].segment_age_order ? segments_made_ : 0;
  block* b = arena_.make();
  b->addr = addr;
  b->bytes = bytes;
  b->seg = seg;
  b->stream = stream;
  b->age_rank = seg->age_rank;
  b->state = expandable ? block_state::unmapped : block_state::free;
  seg->first = b;
  stats_.segment.increase(seg->small, 1);
  stats_.reserved_bytes.increase(seg->small, static_cast<std::int64_t>(seg->mapped_bytes));
  segments_.emplace(addr, std::move(owned));
  return seg;
}

segment* engine_impl::new_expandable_segment(pool_id pool, stream_id stream) {
  // Address space for the whole device (and an eighth more, as PyTorch reserves), so a
  // reservation rarely has to be joined by another; memory is mapped page by page as blocks need it.
  const std::size_t page = pool_traits_[pool].page_bytes;
  const std::size_t bytes = round_up(device_.caps().capacity_bytes + device_.caps().capacity_bytes / 8, page);
  const result<device_address> addr = device_.reserve(bytes);
  if (!addr) return nullptr;
  count_device(&device_stats::num_device_alloc, &phase_stats::num_device_alloc);
  segment* raw = add_segment(addr.value(), bytes, pool, stream, /*expandable=*/true);
  std::vector<segment*>& list = expandable_[{pool, stream}];
  list.insert(std::upper_bound(list.begin(), list.end(), raw,
                               [](const segment* a, const segment* b) { return a->addr < b->addr; }),
              raw);
  return raw;
}

block* engine_impl::grow_expandable(const alloc_request& request, pool_id pool, std::size_t rounded,
                                    std::size_t& grow_bytes, bool new_reservation) {
  const stream_id stream = request.stream;
  const std::size_t page = pool_traits_[pool].page_bytes;
  grow_bytes = round_up(rounded, page);
  const auto allocatable = [](const block* b) {
    return b != nullptr && (b->state == block_state::free || b->state == block_state::unmapped) && b->event_count == 0;
  };
  const bool torch_style = pool_traits_[pool].growth == growth_style::expandable_segments;
  if (torch_style && options_.limit_bytes != 0) {
    const auto reserved = static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current);
    if (reserved + policy_.segment_bytes(pool, rounded) > options_.limit_bytes) return nullptr;
  }
  // The lowest-address unmapped run that, with the free block just before it (and the chain of
  // free and unmapped blocks after it, by the rules), holds the request.
  const auto room_from = [&](const block* start, const block* run) {
    std::size_t room = 0;
    for (const block* w = start; room < rounded && allocatable(w); w = w->next) {
      room += w->bytes;
      if (w == run && !torch_style) break;
    }
    return room;
  };
  std::vector<segment*>& reservations = expandable_[{pool, stream}];
  block* candidate = nullptr;
  for (std::size_t i = 0; i < reservations.size() && candidate == nullptr; ++i) {
    for (block* u = reservations[i]->first; u != nullptr && candidate == nullptr; u = u->next) {
      if (u->state != block_state::unmapped) continue;
      block* start = allocatable(u->prev) ? u->prev : u;
      // A free block that holds the request alone was refused by best fit (the policy's may_use):
      // growing into it would hand it out anyway, which only a chain-growing pool does.
      if (!torch_style && start != u && start->bytes >= rounded) continue;
      if (room_from(start, u) >= rounded) candidate = start;
    }
  }
  if (candidate == nullptr && (torch_style || new_reservation || reservations.empty())) {
    segment* seg = new_expandable_segment(pool, stream);
    if (seg != nullptr && seg->bytes >= rounded) candidate = seg->first;
  }
  if (candidate == nullptr) return nullptr;
  grow_bytes = round_up(rounded - (candidate->state == block_state::free ? candidate->bytes : 0), page);

  // Map the chain's unmapped runs in address order until the merged block holds the request; each
  // run mapped joins the pool, so a failure leaves what was mapped cached.
  block* c = candidate;
  if (c->state == block_state::unmapped) {
    c = map_run(request, pool, rounded, c, std::min(c->bytes, rounded));
    if (c == nullptr) return nullptr;
  }
  while (c->bytes < rounded) {
    PHASEALLOC_CHECK(c->next != nullptr && c->next->state == block_state::unmapped,
                     "expandable chain at {:#x} ends before {} bytes", c->addr, rounded);
    c = map_run(request, pool, rounded, c->next, std::min(rounded - c->bytes, c->next->bytes));
    if (c == nullptr) return nullptr;
  }
  pools_[pool].erase(c);
  return c;
}

block* engine_impl::map_run(const alloc_request& request, pool_id pool, std::size_t rounded, block* u,
                            std::size_t need_bytes) {
  PHASEALLOC_CHECK(u != nullptr && u->state == block_state::unmapped, "map_run: block is not an unmapped run");
  segment* seg = u->seg;
  const std::size_t page = pool_traits_[pool].page_bytes;
  const std::size_t need = std::min(u->bytes, round_up(need_bytes, page));
  const auto reserved = static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current);
  const bool limited = options_.limit_bytes != 0 && pool_traits_[pool].growth != growth_style::expandable_segments;
  if (limited && reserved + need > options_.limit_bytes) return nullptr;
  // Map ahead as far as the policy asks when there is room: one call now saves the next few.
  const std::size_t ahead = policy_.map_ahead_bytes(make_grow_context(request, pool, rounded, need));
  std::size_t map_bytes = std::min(u->bytes, std::max(need, round_up(ahead, page)));
  if (limited && reserved + map_bytes > options_.limit_bytes) map_bytes = need;
  errc mapped = device_.map(u->addr, map_bytes);
  if (mapped != errc::ok && map_bytes > need) {  // no room to map ahead: map what is needed
    map_bytes = need;
    mapped = device_.map(u->addr, need);
  }
  if (mapped != errc::ok) return nullptr;
  count_device(&device_stats::num_device_map, &phase_stats::num_device_map);  // maps made, as segment_map events
  block* m = map_bytes < u->bytes ? split_front(u, map_bytes) : u;
  m->state = block_state::free;
  seg->mapped_bytes += map_bytes;
  stats_.reserved_bytes.increase(seg->small, static_cast<std::int64_t>(map_bytes));
  emit(trace_op::segment_map, m->addr, map_bytes, map_bytes, seg->stream);
  observe_levels(/*settled=*/false);
  m = merge_neighbours(m);  // absorbs free neighbours, taking them out of the pool
  pools_[pool].insert(m);
  return m;
}

}  // namespace phasealloc::detail
