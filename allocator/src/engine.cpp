// The engine: allocation, free, streams and phases. Growing is in engine_grow.cpp, releasing
// cached memory in engine_release.cpp, the invariant checker in invariants.cpp.
//
// Design note: the allocation path
// Rationale: PyTorch's caching allocator is the baseline users know; its shape (best fit per
//   stream in size-ordered pools, split, merge on free, events for cross-stream frees, release
//   and retry on OOM) is kept, and every decision it hard-codes is asked of the policy instead.
// Approach: allocate = round (policy) -> pool (policy) -> best fit in that pool on that stream,
//   filtered by may_use (policy) -> else grow: before_grow plan, then a new segment (or pages of
//   an expandable reservation) -> else on_oom plan, one retry after each step -> else an
//   alloc_error with the report. The chosen block is split when should_split (policy) says so.
//   Stats and the phase book are updated in one place per outcome; after_operation() folds the
//   levels into the phase book and, in tests, runs the invariant checker.
//   Lifetimes: every block handed out is stamped with the engine's interval count (transitions so
//   far, block::birth_interval; one store, also on the fast path), and a policy that asks for it
//   (wants_live_blocks) gets every allocated block with its stamp at each transition, from one walk
//   of the live table; every policy gets the bytes allocated now per birth interval, sums the
//   engine keeps as blocks come and go (two additions per pair on the hot path, no walk): what outlived the interval that ends, and what outlived earlier ones. The
//   policy may then place a request at the lowest-address fit instead of the best fit
//   (placement_for, asked with pool_for); such a request is not cached, settles the deferred free,
//   walks the pool's free blocks, and never takes the fast path.
//   The hot path: a free with nothing to wait for defers its merge (deferred_free.cpp),
//   and the facade first tries allocate_hot / deallocate_hot: the deferred block taken back for the
//   request that took it last time, and a correct free that defers. The policy's rounding and pool
//   for the same (size, least block size, stream, tag) are reused until a policy hook that may
//   change its state runs (before_grow, on_oom, on_transition, a release plan): round_bytes and
//   pool_for are const.
// Limitations: one lock per engine (per device, engine_lock.hpp); contention is measured in bench/.
//   A policy whose round_bytes or pool_for answers change without one of its hooks being called
//   (a clock, a mutable counter) would be served stale answers by the reuse.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "engine_impl.hpp"
#include "phasealloc/check.hpp"

namespace phasealloc {
namespace detail {

engine_impl::engine_impl(device& dev, policy& pol, engine_options options)
    : device_(dev), policy_(pol), options_(options) {
  const auto traits = policy_.pools();
  pool_traits_.assign(traits.begin(), traits.end());
  PHASEALLOC_CHECK(!pool_traits_.empty(), "policy '{}' defines no pools", policy_.spec());
  const device_caps& caps = device_.caps();
  max_request_bytes_ = std::min(caps.capacity_bytes, SIZE_MAX / 4);
  for (pool_traits& t : pool_traits_) {
    if (!t.expandable) continue;
    if (!caps.has_virtual_reserve || !caps.has_partial_unmap) {
      // The policy asked for page-granular growth on a device that cannot map pages: serve the
      // pool with whole segments instead, and say so once.
      std::fprintf(stderr, "phasealloc: pool '%s' is expandable but device '%.*s' has no virtual memory; "
                   "using whole segments\n", t.name.c_str(), static_cast<int>(device_.name().size()),
                   device_.name().data());
      t.expandable = false;
      continue;
    }
    t.page_bytes = round_up(std::max(t.page_bytes, caps.granularity_bytes), caps.granularity_bytes);
  }
  pools_.reserve(pool_traits_.size());
  for (const pool_traits& t : pool_traits_) pools_.emplace_back(&nodes_, t.growth == growth_style::expandable_segments);
  const double fraction = policy_.memory_fraction();
  // Policies check the fraction when they parse it: a value outside (0, 1] here is a broken policy.
  PHASEALLOC_CHECK(fraction > 0.0 && fraction <= 1.0, "policy '{}' asks for memory fraction {}", policy_.spec(),
                   fraction);
  if (options_.limit_bytes == 0 && fraction < 1.0) {
    // A fraction too small for one byte of this device is a limit of one byte (nothing fits), never
    // "no limit"; tools ask memory_limit_bytes() first and refuse such a fraction with a message.
    auto limit = memory_limit_bytes(fraction, caps.capacity_bytes);
    options_.limit_bytes = limit ? limit.value() : 1;
  }
}

engine_impl::~engine_impl() {
  // Give everything back. Blocks still allocated are the caller's leak; their memory goes too.
  if (moves_in_flight_ != 0) (void)finish_moves(0, /*wait=*/true);
  if (!pending_.empty()) synchronize_pending();
  if (device_.caps().has_virtual_reserve && !segments_.empty()) (void)device_.synchronize();
  // Unmapped by mapped runs (whole pages, as they were mapped), each offloaded range on its own
  // (the device unmaps host-backed pages only as the whole range an offload moved).
  const auto unmap_run = [&](device_address lo, device_address hi) {
    for (auto it = offloaded_.lower_bound(lo); it != offloaded_.end() && it->first < hi; ++it) {
      if (it->first > lo) (void)device_.unmap(lo, it->first - lo);
      (void)device_.unmap(it->first, it->second.bytes);
      lo = it->second.end();
    }
    if (hi > lo) (void)device_.unmap(lo, hi - lo);
  };
  for (auto& [addr, seg] : segments_) {
    if (device_.caps().has_virtual_reserve) {
      std::optional<device_address> run_start;
      for (const block* b = seg->first; b != nullptr; b = b->next) {
        if (b->state == block_state::unmapped) {
          if (run_start) unmap_run(*run_start, b->addr);
          run_start.reset();
        } else if (!run_start) {
          run_start = b->addr;
        }
      }
      if (run_start) unmap_run(*run_start, seg->end());
    }
    (void)device_.release(seg->addr, seg->bytes);
  }
  for (event_id e : spare_events_) device_.destroy_event(e);
}

void engine_impl::send(trace_op op, device_address addr, std::size_t requested, std::size_t bytes,
                       stream_id stream, std::uint32_t tag, std::string_view name) {
  trace_record r;
  r.op = op;
  r.addr = addr;
  r.requested_bytes = requested;
  r.block_bytes = bytes;
  r.stream = stream;
  r.phase = phases_.current();
  r.tag = tag;
  r.name = name;
  r.reserved_bytes = static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current);
  sink_->on_event(r);
}

std::size_t engine_impl::largest_free_bytes() const {
  std::size_t largest = 0;
  for (const block_pool& p : pools_) largest = std::max(largest, p.largest_bytes());
  return largest;
}

void engine_impl::count_device(std::int64_t device_stats::*global, std::int64_t phase_stats::*phase) {
  ++(stats_.*global);
  ++(phases_.current_stats().*phase);
}

void engine_impl::note_reserved_peak() {
  settle();
  phases_.set_largest_free_at_peak(static_cast<std::int64_t>(largest_free_bytes()));
}

void engine_impl::check_or_abort() const {
  const std::vector<std::string> broken = check_invariants();
  PHASEALLOC_CHECK(broken.empty(), "{} broken invariant(s):\n  {}", broken.size(), fmt::join(broken, "\n  "));
}

// --- allocation --------------------------------------------------------------------------------

result<device_address, alloc_error> engine_impl::allocate(std::size_t bytes, std::size_t place_bytes, stream_id stream,
                                                      std::uint32_t tag) {
  if (!pending_.empty() && !device_calls_held_) process_events();
  const alloc_request request{bytes, stream, phases_.current(), tag};
  if (place_bytes > max_request_bytes()) {
    // More than the whole device (a size near 2^64 from a bad trace or caller): no policy can
    // round it without overflow and no device can hold it. Out of memory, before the policy sees it.
    settle();
    alloc_error error;
    ++stats_.num_ooms;
    ++phases_.current_stats().num_ooms;
    emit(trace_op::oom, 0, bytes, bytes, stream, tag);
    fill_oom_report(request, "(none: larger than the device)", place_bytes, 0, error);
    after_operation();
    return error;
  }
  // The policy's answers for the same request as last time (see the note on forget_policy_answers).
  if (last_answer_.bytes != bytes || last_answer_.place_bytes != place_bytes || last_answer_.stream != stream ||
      last_answer_.tag != tag) {
    const std::size_t rounded = policy_.round_bytes(place_bytes);
    PHASEALLOC_CHECK(rounded >= place_bytes && rounded > 0, "policy '{}' rounded {} bytes to {}", policy_.spec(),
                     place_bytes, rounded);
    const pool_id pool = policy_.pool_for(request, rounded);
    PHASEALLOC_CHECK(pool < pools_.size(), "policy '{}' chose pool {} of {}", policy_.spec(), pool, pools_.size());
    last_answer_ = {bytes, place_bytes, stream, tag, rounded, pool, policy_.placement_for(request, rounded)};
  }
  const std::size_t rounded = last_answer_.rounded;
  const pool_id pool = last_answer_.pool;
  const bool lowest = last_answer_.where == placement::lowest_address;
  // A request placed lowest-address is asked again next time: the fast path (allocate_hot), which
  // reads the cached answer, serves best-fit requests only.
  if (lowest) last_answer_.bytes = SIZE_MAX;

  block* b = nullptr;
  if (lowest) settle();  // the deferred block answers best-fit questions only
  if (deferred_ != nullptr) {
    b = take_deferred(stream, pool, rounded);
    if (b != nullptr && bytes == deferred_requested_) return allocate_again(b, bytes, stream, tag);
    if (b != nullptr) {  // taken back for another size: as a block from the pool
      add_block_freed(stats_, b->seg->small, 1, static_cast<std::int64_t>(b->bytes),
                      static_cast<std::int64_t>(deferred_requested_));
      live_bytes_by_interval_[b->birth_interval] -= b->bytes;
    }
  }
  if (b == nullptr) {
    const auto accept = [&](const block* c) { return policy_.may_use(pool, c->bytes, rounded); };
    b = lowest ? pools_[pool].lowest_fit(stream, rounded, accept)
               : pools_[pool].best_fit(stream, rounded, accept, pool_traits_[pool].growth == growth_style::expandable_segments);
    if (b != nullptr) {
      pools_[pool].erase(b);
    } else {
      alloc_error error;
      b = grow(request, pool, rounded, error);
      if (b == nullptr) {
        after_operation();
        return error;
      }
    }
    b = take(b, pool, rounded);
  }
  b->state = block_state::allocated;
  b->requested_bytes = bytes;
  b->tag = tag;
  b->birth_interval = interval_;
  live_.emplace(b->addr, b);
  live_bytes_by_interval_[interval_] += b->bytes;

  const bool small = is_small(pool);
  const auto size = static_cast<std::int64_t>(b->bytes);
  stats_.allocation.increase(small, 1);
  stats_.allocated_bytes.increase(small, size);
  stats_.active.increase(small, 1);
  stats_.active_bytes.increase(small, size);
  stats_.requested_bytes.increase(small, static_cast<std::int64_t>(bytes));
  ++phases_.current_stats().num_allocs;
  emit(trace_op::alloc, b->addr, bytes, b->bytes, stream, tag);
  after_operation();
  return b->addr;
}

block* engine_impl::split_front(block* b, std::size_t bytes) {
  PHASEALLOC_ASSERT(bytes < b->bytes, "split of {} bytes from a {}-byte block", bytes, b->bytes);
  block* front = arena_.make();
  front->addr = b->addr;
  front->bytes = bytes;
  front->seg = b->seg;
  front->stream = b->stream;
  front->age_rank = b->age_rank;
  front->state = b->state;
  front->prev = b->prev;
  front->next = b;
  if (b->prev != nullptr) b->prev->next = front;
  else b->seg->first = front;
  b->prev = front;
  b->addr += bytes;
  b->bytes -= bytes;
  return front;
}

block* engine_impl::take(block* b, pool_id pool, std::size_t rounded) {
  if (b->bytes > rounded && policy_.should_split(pool, b->bytes, rounded)) {
    block* front = split_front(b, rounded);
    pools_[pool].insert(b);  // the remainder stays cached
    return front;
  }
  return b;
}

block* engine_impl::merge_neighbours(block* b) {
  const auto mergeable = [&](const block* n) {
    return n != nullptr && n->state == b->state && n->event_count == 0 &&
           (b->state == block_state::free || b->state == block_state::unmapped);
  };
  block_pool& pool = pools_[b->seg->pool];
  if (mergeable(b->prev)) {
    block* p = b->prev;
    if (p->state == block_state::free) pool.erase(p);
    p->bytes += b->bytes;
    p->next = b->next;
    if (b->next != nullptr) b->next->prev = p;
    arena_.recycle(b);
    b = p;
  }
  if (mergeable(b->next)) {
    block* n = b->next;
    if (n->state == block_state::free) pool.erase(n);
    b->bytes += n->bytes;
    b->next = n->next;
    if (n->next != nullptr) n->next->prev = b;
    arena_.recycle(n);
  }
  return b;
}

// --- free --------------------------------------------------------------------------------------

errc engine_impl::deallocate(device_address addr, std::size_t size_bytes) {
  block* b = live_.erase(addr);
  if (b == nullptr) return classify_unknown(addr, size_bytes);
  errc code = errc::ok;
  if (size_bytes != 0 && size_bytes != b->requested_bytes) {
    code = report_misuse(errc::size_mismatch, addr, size_bytes, b->requested_bytes,
                         fmt::format("free of {:#x} with size {} but it was allocated with size {} (block {})", addr,
                                     size_bytes, b->requested_bytes, b->bytes));
  }
  ++phases_.current_stats().num_frees;
  emit(trace_op::free_requested, addr, b->requested_bytes, b->bytes, b->seg->stream, b->tag);
  const bool small = b->seg->small;
  if (b->stream_uses.empty()) {
    settle();  // b may be the deferred block's neighbour
    if (deferrable(b)) {
      // Levels now, `freed` sums when it settles or in the pair batch (block_books.hpp).
      free_deferred(b, addr);
      return code;
    }
  }
  live_bytes_by_interval_[b->birth_interval] -= b->bytes;
  stats_.allocation.decrease(small, 1);
  stats_.allocated_bytes.decrease(small, static_cast<std::int64_t>(b->bytes));
  stats_.requested_bytes.decrease(small, static_cast<std::int64_t>(b->requested_bytes));

  if (!b->stream_uses.empty()) {
    b->state = block_state::pending_free;
    for (const stream_id s : b->stream_uses) {
      if (const std::optional<event_id> e = record_on(s)) {
        pending_.push_back({b, *e});
        ++b->event_count;
      }
    }
    b->stream_uses.clear();
    if (b->event_count == 0) free_block(b);
  } else {
    free_block(b);
  }
  after_operation();
  return code;
}

void engine_impl::free_block(block* b) {
  settle();  // b may be the deferred block's neighbour: merge that one first, as the eager books did
  const bool small = b->seg->small;
  stats_.active.decrease(small, 1);
  stats_.active_bytes.decrease(small, static_cast<std::int64_t>(b->bytes));
  const std::size_t bytes = b->bytes;
  const device_address addr = b->addr;
  b->requested_bytes = 0;
  b->tag = 0;
  if (b->offloaded) {  // its pages are the host's: out of every pool until restored (engine_offload.cpp)
    emit(trace_op::free_completed, addr, 0, bytes, b->seg->stream);
    free_offloaded(b);
    return;
  }
  b->state = block_state::free;
  b = merge_neighbours(b);
  pools_[b->seg->pool].insert(b);
  emit(trace_op::free_completed, addr, 0, bytes, b->seg->stream);
}

std::optional<event_id> engine_impl::record_on(stream_id stream) {
  event_id e = 0;
  if (!spare_events_.empty()) {
    e = spare_events_.back();
    spare_events_.pop_back();
  } else if (auto created = device_.create_event()) {
    e = created.value();
  } else {
    (void)device_.synchronize();  // no event to wait on: wait for everything instead
    return std::nullopt;
  }
  if (device_.record_event(e, stream) != errc::ok) {
    spare_events_.push_back(e);
    (void)device_.synchronize();
    return std::nullopt;
  }
  return e;
}

void engine_impl::process_events() {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    const pending_free p = pending_[i];
    const result<bool> done = device_.query_event(p.event);
    if (done.has_value() && !done.value()) {
      pending_[kept++] = p;
      continue;
    }
    if (!done.has_value()) (void)device_.synchronize_event(p.event);  // a failed query: wait, then free
    spare_events_.push_back(p.event);
    if (--p.b->event_count == 0) free_block(p.b);
  }
  pending_.resize(kept);
}

void engine_impl::synchronize_pending() {
  for (const pending_free& p : pending_) {
    (void)device_.synchronize_event(p.event);
    spare_events_.push_back(p.event);
    if (--p.b->event_count == 0) free_block(p.b);
  }
  pending_.clear();
}

errc engine_impl::record_stream(device_address addr, stream_id stream) {
  block* b = live_.find(addr);
  if (b == nullptr) return classify_unknown(addr, 0);
  if (stream != b->seg->stream &&
      std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end()) {
    b->stream_uses.push_back(stream);
  }
  emit(trace_op::record_stream, addr, 0, b->bytes, stream);
  return errc::ok;
}

// --- misuse ------------------------------------------------------------------------------------

errc engine_impl::report_misuse(errc code, device_address addr, std::size_t size_bytes, std::size_t expected_bytes,
                                std::string message) {
  ++stats_.num_misuse;
  last_misuse_ = misuse_report{code, addr, size_bytes, expected_bytes, std::move(message)};
  if (options_.strict) {
    detail::report_fatal("no misuse (strict mode)", __FILE__, __LINE__,
                         fmt::format("{}: {}", to_string(code), last_misuse_.message));
  }
  std::fprintf(stderr, "phasealloc: %s: %s\n", std::string(to_string(code)).c_str(), last_misuse_.message.c_str());
  return code;
}

errc engine_impl::classify_unknown(device_address addr, std::size_t size_bytes) {
  settle();  // the message names the block as the eager books have it
  auto it = segments_.upper_bound(addr);
  if (it != segments_.begin()) {
    const segment& seg = *std::prev(it)->second;
    if (addr < seg.end()) {
      for (const block* b = seg.first; b != nullptr; b = b->next) {
        if (addr < b->addr || addr >= b->addr + b->bytes) continue;
        if (b->state == block_state::allocated) {
          return report_misuse(errc::interior_pointer, addr, size_bytes, b->requested_bytes,
                               fmt::format("{:#x} points {} bytes into the allocated block at {:#x} ({} bytes); "
                                           "free takes the address allocate returned",
                                           addr, addr - b->addr, b->addr, b->requested_bytes));
        }
        const char* state = b->state == block_state::pending_free     ? "pending-free"
                            : b->state == block_state::unmapped       ? "unmapped"
                            : b->state == block_state::offloaded_free ? "free (offloaded)"
                                                                      : "free";
        return report_misuse(errc::double_free, addr, size_bytes, 0,
                             fmt::format("{:#x} lies in a {} block [{:#x}, +{}) of the segment at {:#x}: it was "
                                         "already freed",
                                         addr, state, b->addr, b->bytes, seg.addr));
      }
    }
  }
  return report_misuse(errc::unknown_pointer, addr, size_bytes, 0,
                       fmt::format("{:#x} was never allocated by this engine (no segment holds it)", addr));
}

// --- phases and books --------------------------------------------------------------------------

phase_id engine_impl::transition(std::string_view name, int kind) {
  // The policy acts before the new phase starts: what it releases is the old phase's cache, and
  // the new phase's peaks start from the levels after the release.
  settle();
  forget_policy_answers();  // on_transition may change what the policy answers
  transition_context c;
  c.from = phases_.current();
  c.to = kind == 1 ? phases_.below() : phases_.intern(name);
  c.from_name = phases_.name(c.from);
  c.to_name = phases_.name(c.to);
  c.interval_peak_allocated_bytes = static_cast<std::size_t>(phases_.interval_peak_allocated());
  c.interval_peak_reserved_bytes = static_cast<std::size_t>(phases_.interval_peak_reserved());
  c.reserved_bytes = static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current);
  c.allocated_bytes = static_cast<std::size_t>(stats_.allocated_bytes[stat_type::all].current);
  c.capacity_bytes = device_.caps().capacity_bytes;
  c.interval = interval_;
  if (policy_.wants_live_blocks()) {
    live_blocks_.clear();
    live_.for_each([&](const block* b) {
      live_blocks_.push_back({b->requested_bytes, b->bytes, b->stream, b->seg->pool, b->tag, b->birth_interval});
    });
    c.live_blocks = live_blocks_;
  }
  c.live_bytes_by_interval = live_bytes_by_interval_;
  const release_plan plan = policy_.on_transition(c);
  if (!plan.empty()) run_plan(plan);
  phases_.observe(levels());  // the release's effect belongs to the old phase's books

  emit(trace_op::phase_end, 0, 0, 0, 0, 0, c.from_name);
  switch (kind) {
    case 0: phases_.push(c.to); break;
    case 1: phases_.pop(); break;
    default: phases_.replace(c.to); break;
  }
  ++interval_;
  live_bytes_by_interval_.push_back(0);
  if (c.to != c.from) {  // a new interval of the same phase leaves its holes its own
    ++phase_epoch_;
    for (block_pool& p : pools_) p.set_epoch(phase_epoch_);
  }
  emit(trace_op::phase_begin, 0, 0, 0, 0, 0, c.to_name);
  after_operation();
  return c.to;
}

device_stats engine_impl::stats() const {
  device_stats s = stats_;
  // Free blocks of split segments are counted from the pools when asked (peak = current).
  s.inactive_split = {};
  s.inactive_split_bytes = {};
  for (const block_pool& p : pools_) {
    p.for_each([&](const block* b) {
      if (!b->is_split()) return;
      for (const stat_type t : {stat_type::all, b->seg->small ? stat_type::small_pool : stat_type::large_pool}) {
        s.inactive_split[t].current += 1;
        s.inactive_split_bytes[t].current += static_cast<std::int64_t>(b->bytes);
      }
    });
  }
  for (stat_array* a : {&s.inactive_split, &s.inactive_split_bytes}) {
    for (stat& st : a->by_type) st.peak = st.current;
  }
  return s;
}

snapshot engine_impl::take_snapshot() const {
  snapshot out;
  out.policy_spec = policy_.spec();
  out.device_name = std::string(device_.name());
  for (const auto& [addr, seg] : segments_) {
    snapshot_segment s;
    s.addr = seg->addr;
    s.bytes = seg->bytes;
    s.mapped_bytes = seg->mapped_bytes;
    s.offloaded_bytes = seg->offloaded_bytes;
    s.stream = seg->stream;
    s.pool = pool_traits_[seg->pool].name;
    s.small = seg->small;
    s.expandable = seg->expandable;
    for (const block* b = seg->first; b != nullptr; b = b->next) {
      s.blocks.push_back({b->addr, b->bytes, b->requested_bytes, b->state, b->offloaded});
      if (b->state == block_state::allocated) s.allocated_bytes += b->bytes;
      if (b->state == block_state::allocated || b->state == block_state::pending_free) s.active_bytes += b->bytes;
      s.requested_bytes += b->requested_bytes;
    }
    out.segments.push_back(std::move(s));
  }
  return out;
}

}  // namespace detail

// --- the public facade: lock, forward ----------------------------------------------------------

engine::engine(device& dev, policy& pol, engine_options options)
    : impl_(std::make_unique<detail::engine_impl>(dev, pol, options)) {}
engine::~engine() = default;

result<device_address, alloc_error> engine::allocate(std::size_t bytes, stream_id stream, std::uint32_t tag,
                                                 std::size_t min_block_bytes) {
  const std::size_t place_bytes = std::max(bytes, min_block_bytes);
  std::lock_guard lock(impl_->mutex_);
  if (const device_address addr = impl_->allocate_hot(bytes, place_bytes, stream, tag)) return addr;
  return impl_->allocate(bytes, place_bytes, stream, tag);
}
errc engine::deallocate(device_address addr, std::size_t size_bytes) {
  std::lock_guard lock(impl_->mutex_);
  if (impl_->deallocate_hot(addr, size_bytes)) return errc::ok;
  return impl_->deallocate(addr, size_bytes);
}
errc engine::record_stream(device_address addr, stream_id stream) {
  std::lock_guard lock(impl_->mutex_);
  return impl_->record_stream(addr, stream);
}
void engine::empty_cache() {
  std::lock_guard lock(impl_->mutex_);
  impl_->emit(trace_op::empty_cache, 0, 0, 0, 0);
  impl_->run_plan(impl_->policy_.on_empty_cache());
  impl_->after_operation();
}
result<std::vector<device_address>, std::string> engine::seed(const std::vector<seed_segment>& segments) {
  std::lock_guard lock(impl_->mutex_);
  return impl_->seed(segments);
}
result<offload_outcome, offload_error> engine::offload(std::span<const device_address> addrs,
                                                       const move_options& options) {
  std::lock_guard lock(impl_->mutex_);
  return impl_->offload(addrs, options);
}
result<offload_outcome, offload_error> engine::restore(std::span<const device_address> addrs,
                                                       const move_options& options) {
  std::lock_guard lock(impl_->mutex_);
  return impl_->restore(addrs, options);
}
result<offload_outcome, offload_error> engine::offload_tagged(std::uint32_t tag, const move_options& options) {
  std::lock_guard lock(impl_->mutex_);
  if (tag == 0) return offload_error{errc::invalid_argument, "offload of tag 0: 0 means untagged: nothing was offloaded", {}};
  const std::vector<device_address> addrs = impl_->tagged_blocks(tag);
  return impl_->offload(addrs, options);
}
result<offload_outcome, offload_error> engine::restore_tagged(std::uint32_t tag, const move_options& options) {
  std::lock_guard lock(impl_->mutex_);
  if (tag == 0) return offload_error{errc::invalid_argument, "restore of tag 0: 0 means untagged: nothing was restored", {}};
  const std::vector<device_address> addrs = impl_->tagged_blocks(tag);
  if (addrs.empty()) return offload_outcome{};  // restore() of no address would restore every range
  return impl_->restore(addrs, options);
}
std::size_t engine::tagged_bytes(std::uint32_t tag) const {
  std::lock_guard lock(impl_->mutex_);
  std::size_t bytes = 0;
  impl_->live_.for_each([&](const detail::block* b) {
    if (b->tag == tag) bytes += b->bytes;
  });
  return bytes;
}
result<bool, offload_error> engine::finish_moves(std::uint64_t ticket, bool wait) {
  std::lock_guard lock(impl_->mutex_);
  if (std::optional<offload_error> e = impl_->take_unreported_move_error()) return std::move(*e);
  auto r = impl_->finish_moves(ticket, wait);
  impl_->after_operation();
  return r;
}
errc engine::order_after_moves(std::uint64_t ticket, stream_id stream) {
  std::lock_guard lock(impl_->mutex_);
  return impl_->order_after_moves(ticket, stream);
}
std::size_t engine::release(const release_plan& plan) {
  std::lock_guard lock(impl_->mutex_);
  const std::size_t released = impl_->run_plan(plan);
  impl_->after_operation();
  return released;
}
phase_id engine::begin_phase(std::string_view name) {
  std::lock_guard lock(impl_->mutex_);
  return impl_->transition(name, 0);
}
void engine::end_phase() {
  std::lock_guard lock(impl_->mutex_);
  impl_->transition({}, 1);
}
phase_id engine::set_phase(std::string_view name) {
  std::lock_guard lock(impl_->mutex_);
  return impl_->transition(name, 2);
}
std::string engine::current_phase() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->phases_.name(impl_->phases_.current());
}
memory_levels engine::levels() const {
  std::lock_guard lock(impl_->mutex_);
  const detail::byte_levels l = impl_->levels();
  return {static_cast<std::size_t>(l.allocated), static_cast<std::size_t>(l.reserved),
          static_cast<std::size_t>(l.active), static_cast<std::size_t>(l.requested)};
}
device_stats engine::stats() const {
  std::lock_guard lock(impl_->mutex_);
  impl_->settle();  // the books an eager engine would show
  impl_->pairs_.fold(impl_->stats_);
  return impl_->stats();
}
std::vector<phase_stats> engine::phases() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->phases_.all();
}
void engine::reset_peak_stats() {
  std::lock_guard lock(impl_->mutex_);
  impl_->settle();  // a deferred free taken back would raise the levels past the new peaks unchecked
  impl_->stats_.for_each_array([](stat_array& a) {
    for (stat& s : a.by_type) s.reset_peak();
  });
}
void engine::reset_accumulated_stats() {
  std::lock_guard lock(impl_->mutex_);
  impl_->settle();
  impl_->pairs_.fold(impl_->stats_);  // then dropped with the rest
  impl_->stats_.for_each_array([](stat_array& a) {
    for (stat& s : a.by_type) s.reset_accumulated();
  });
  device_stats& s = impl_->stats_;
  s.num_alloc_retries = s.num_ooms = s.num_sync_all_streams = 0;
  s.num_device_alloc = s.num_device_free = s.num_device_map = s.num_device_unmap = 0;
}
snapshot engine::take_snapshot() const {
  std::lock_guard lock(impl_->mutex_);
  impl_->settle();  // the books an eager engine would show
  return impl_->take_snapshot();
}
misuse_report engine::last_misuse() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->last_misuse_;
}
std::size_t engine::limit_bytes() const {
  std::lock_guard lock(impl_->mutex_);
  return impl_->options_.limit_bytes;
}
result<std::size_t, std::string> memory_limit_bytes(double fraction, std::size_t capacity_bytes) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    return fmt::format("memory fraction {} is not in (0, 1]", fraction);
  }
  if (fraction == 1.0) return std::size_t{0};
  const double limit = fraction * static_cast<double>(capacity_bytes);
  if (limit < 1.0) {
    return fmt::format("memory fraction {} of a {}-byte device is less than one byte (the smallest fraction of this "
                       "device is {:.3g})",
                       fraction, capacity_bytes, 1.0 / static_cast<double>(capacity_bytes));
  }
  return static_cast<std::size_t>(limit);
}

void engine::hold_device_calls(bool held) {
  std::lock_guard lock(impl_->mutex_);
  impl_->device_calls_held_ = held;
}

errc engine::grant_peer_access(int peer) {
  std::lock_guard lock(impl_->mutex_);
  return impl_->device_.grant_peer_access(peer);
}

void engine::set_limit_bytes(std::size_t limit_bytes) {
  std::lock_guard lock(impl_->mutex_);
  impl_->options_.limit_bytes = limit_bytes;
}
const policy& engine::current_policy() const noexcept { return impl_->policy_; }
const device& engine::current_device() const noexcept { return impl_->device_; }
std::vector<std::string> engine::check_invariants() const {
  std::lock_guard lock(impl_->mutex_);
  impl_->settle();  // the books an eager engine would show
  return impl_->check_invariants();
}
void engine::set_trace_sink(trace_sink* sink) {
  std::lock_guard lock(impl_->mutex_);
  impl_->sink_ = sink;
  impl_->sink_ops_ = sink != nullptr ? sink->wanted_ops() : 0;
}

}  // namespace phasealloc
