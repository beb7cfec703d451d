// The engine's half of same-address offload: which pages of the named blocks leave, the books of
// the ranges that left, and what a free, a release or a restore does to them. The device moves
// the bytes (device.hpp: offload/restore; cuda_vmm_offload.cpp on a GPU).
//
// Note [offloaded ranges]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Rationale
//   Idle state (Adam's moments outside step(), a frozen model outside its forward) is live: its
//   blocks cannot be freed, and no placement or release rule gets below them. Moving their bytes
//   to host memory mapped at the same addresses takes them off the device without touching a
//   pointer the job holds; a kernel that touches them anyway is slow, not wrong.
// Approach
//   - A page leaves only when every block on it was named: adjacent named blocks of one segment
//     form a run, and the whole pages inside the run (page_bytes_of, the unit release uses) are one
//     range, moved with one device call that copies only the blocks' requested bytes (never a free
//     cached byte) after events on the streams that used them. An edge page whose other bytes are
//     one free block (nothing pending) leaves with the run: that free memory becomes offloaded_free
//     (not copied). What the run holds outside those pages stays, and is counted
//     (offload_kept_bytes): a tagged region (a tag's pool) gives its blocks pages of their own, so
//     nothing stays. offload_tagged names every allocated block carrying a tag. A device that
//     mapped part of the range in a larger handle (cuda_vmm restores in chunks) trims it to the
//     handles it covers whole (device::unmap_span); a page release does the same.
//   - move_options::copy_only narrows the copies further, for blocks lent whole to another
//     allocator (a CUDA graph pool's segments): only the bytes it holds are copied, both ways.
//   - Books: an offloaded range stays mapped (mapped_bytes) but is not reserved: reserved_bytes is
//     the device's memory, offloaded_bytes the host's. The trace and the event listener see an
//     offload as a segment_unmap and a restore as a segment_map of the range, so whoever follows
//     reserved bytes by those events (the c10 bridge, a recording's replay) stays exact. Blocks overlapping a range carry
//     `offloaded`; they are never split, merged, pooled or released, so no release step, growth or
//     empty_cache can unmap a host-backed page behind the range's back.
//   - A block freed while offloaded becomes offloaded_free (out of every pool: reusing it would
//     hand out host memory). When a range's last live block goes, the range is unmapped whole and
//     its pages booked unmapped, as a page release books them: the host memory goes back.
//   - A restore first gives back as much cached free memory as it will map (the policy's
//     before_restore: the range cannot reuse it, being bound to its addresses; a blocking restore
//     only, as the release waits for the device), then brings whole
//     ranges back, copying the blocks still live; out of device memory it
//     releases what the policy's empty_cache plan releases and tries once more, and otherwise
//     leaves the range on the host, where its bytes are still correct, and says so.
//   - Non-blocking moves: the device starts a range's move (offload_start / restore_start) and the
//     range stays in offloaded_ with `in_flight` set (the call's number, the caller's ticket) until
//     land() finishes it. A range in flight is the device's memory in the books: an offload's pages
//     are booked offloaded only when its copies are done and the device released them (a failed
//     finish puts the blocks back, contents intact); a restore's are booked reserved at its start.
//     Its blocks keep `offloaded` until the landing, so a block freed meanwhile is reused only once
//     the copies that read or write it are done. Moves land when the caller finishes them, when an
//     offload or restore call finds them done, when an allocation would otherwise run out of
//     memory (growth waits for them), and before a free drops a range.
// Limitations
//   - Landing waits on the host while the engine lock is held (an allocation that needs the pages
//     waits for the copies anyway); a failure found there is kept and reported by the next offload,
//     restore or finish call, since the allocation cannot report it.
//   - A replay of a trace re-drives allocations only: the model keeps offloaded pages on its device
//     (the recording's own reserved level, from the segment events, shows them leave).
//   - A restore of a range that is mostly freed still maps the whole range back.
#include <algorithm>
#include <set>

#include "engine_impl.hpp"

namespace phasealloc::detail {

namespace {

bool overlaps(const block* b, device_address lo, device_address hi) { return b->addr < hi && lo < b->addr + b->bytes; }

bool free_and_idle(const block* b) {
  return b != nullptr && b->state == block_state::free && b->event_count == 0;
}

bool is_live(const block* b) {
  return b->state == block_state::allocated || b->state == block_state::pending_free;
}

/// The requested bytes of the live blocks from `first` that overlap [lo, hi), clipped to it.
std::vector<byte_range> live_ranges(const block* first, device_address lo, device_address hi) {
  std::vector<byte_range> out;
  for (const block* b = first; b != nullptr && b->addr < hi; b = b->next) {
    if (!is_live(b) || b->requested_bytes == 0) continue;
    const device_address from = std::max(b->addr, lo);
    const device_address to = std::min(b->addr + b->requested_bytes, hi);
    if (from < to) out.push_back({from, to - from});
  }
  return out;
}

/// The bytes a move of [lo, hi) from `first` copies: each live block's requested bytes, narrowed to
/// options.copy_only for the blocks named in `lent` (sorted): a block lent whole to another
/// allocator holds values only where that allocator says. Every other block is copied whole, so a
/// range that also holds blocks of another call never loses their bytes.
std::vector<byte_range> copy_ranges(const block* first, device_address lo, device_address hi,
                                    const move_options& options, std::span<const device_address> lent) {
  std::vector<byte_range> live = live_ranges(first, lo, hi);
  if (!options.copy_only) return live;
  const std::span<const byte_range> only = *options.copy_only;
  std::vector<byte_range> out;
  const block* b = first;
  for (const byte_range& r : live) {
    while (b->addr + b->bytes <= r.addr) b = b->next;  // the block r was cut from
    if (!std::binary_search(lent.begin(), lent.end(), b->addr)) {
      out.push_back(r);
      continue;
    }
    for (const byte_range& o : only) {
      const device_address from = std::max(r.addr, o.addr);
      const device_address to = std::min(r.addr + r.bytes, o.addr + o.bytes);
      if (from < to) out.push_back({from, to - from});
    }
  }
  return out;
}

}  // namespace

std::map<device_address, offloaded_range>::iterator engine_impl::range_of(const block* b) {
  auto it = offloaded_.upper_bound(b->addr + b->bytes - 1);
  PHASEALLOC_ASSERT(it != offloaded_.begin(), "offloaded block {:#x} overlaps no offloaded range", b->addr);
  --it;
  PHASEALLOC_ASSERT(overlaps(b, it->second.addr, it->second.end()), "offloaded block {:#x} overlaps no offloaded range",
                    b->addr);
  return it;
}

block* engine_impl::first_block_in(const offloaded_range& r) const {
  block* b = r.seg->first;
  while (b != nullptr && b->addr + b->bytes <= r.addr) b = b->next;
  return b;
}

std::vector<stream_id> engine_impl::streams_of(const block* first, device_address end) const {
  std::vector<stream_id> streams{first->seg->stream};
  for (const block* b = first; b != nullptr && b->addr < end; b = b->next) {
    for (const stream_id s : b->stream_uses) {
      if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
    }
  }
  return streams;
}

std::vector<event_id> engine_impl::events_for(const block* first, device_address end) {
  std::vector<event_id> events;
  for (const stream_id s : streams_of(first, end)) {
    if (const std::optional<event_id> e = record_on(s)) events.push_back(*e);
  }
  return events;
}

void engine_impl::recycle_events(const std::vector<event_id>& events) {
  spare_events_.insert(spare_events_.end(), events.begin(), events.end());
}

std::vector<device_address> engine_impl::tagged_blocks(std::uint32_t tag) const {
  std::vector<device_address> out;
  live_.for_each([&](const block* b) {
    if (b->tag == tag) out.push_back(b->addr);
  });
  std::sort(out.begin(), out.end());
  return out;
}

block* engine_impl::carve_free_edge(block* b, device_address lo, device_address hi) {
  pools_[b->seg->pool].erase(b);
  if (b->addr < lo) pools_[b->seg->pool].insert(split_front(b, lo - b->addr));  // the part before stays cached
  if (b->addr + b->bytes > hi) {
    block* inside = split_front(b, hi - b->addr);
    pools_[b->seg->pool].insert(b);  // the part after stays cached
    b = inside;
  }
  b->state = block_state::offloaded_free;
  return b;
}

result<offload_outcome, offload_error> engine_impl::offload(std::span<const device_address> addrs,
                                                            const move_options& options) {
  const bool non_blocking = options.non_blocking;
  settle();
  offload_outcome done;
  if (!can_offload(device_.caps())) {
    return offload_error{errc::not_supported,
                         fmt::format("device '{}' cannot offload (offload needs the cuda_vmm device, which keeps an "
                                     "offloaded block at its address): nothing was offloaded",
                                     device_.name()),
                         done};
  }
  if (device_calls_held_) {
    return offload_error{errc::invalid_argument,
                         "offload while a CUDA graph capture (or a pool route) is under way on the device: nothing "
                         "was offloaded",
                         done};
  }
  if (auto landed = land_done_moves(); !landed) return landed.error();
  std::vector<block*> named;
  named.reserve(addrs.size());
  for (const device_address addr : addrs) {
    block* b = live_.find(addr);
    if (b == nullptr) {
      return offload_error{errc::unknown_pointer,
                           fmt::format("offload of {:#x}: no allocated block starts there: nothing was offloaded", addr),
                           done};
    }
    if (b->offloaded) {  // a restore in flight finishes first (an offload in flight is leaving already)
      const auto it = range_of(b);
      if (it->second.in_flight != 0 && it->second.restoring) {
        const offloaded_range r = it->second;
        if (const errc e = land(it); e != errc::ok) return landing_error(r, e, done);
      }
    }
    if (!b->offloaded) named.push_back(b);
  }
  std::sort(named.begin(), named.end(), [](const block* a, const block* b) { return a->addr < b->addr; });
  named.erase(std::unique(named.begin(), named.end()), named.end());
  std::vector<device_address> named_addrs;  // sorted: the blocks copy_only narrows
  if (options.copy_only) {
    for (const block* b : named) named_addrs.push_back(b->addr);
  }
  const std::uint64_t call = ++move_calls_;
  const auto trace_run = [&](const block* from, const block* to) {  // the run's blocks, as named
    for (const block* b = from;; b = b->next) {
      if (is_live(b)) emit(trace_op::offload, b->addr, call, b->bytes, b->seg->stream);
      if (b == to) break;
    }
  };

  for (std::size_t i = 0; i < named.size();) {
    // A run: named blocks that follow each other in one segment.
    std::size_t j = i + 1;
    while (j < named.size() && named[j - 1]->next == named[j]) ++j;
    block* first = named[i];
    const block* last = named[j - 1];
    const std::size_t count = j - i;
    i = j;
    segment* seg = first->seg;
    const std::size_t page = page_bytes_of(*seg);
    const device_address run_end = last->addr + last->bytes;
    // The pages the run covers whole, and an edge page whose other bytes are free cached memory
    // (a free block, nothing pending on it): that memory goes with the run (not copied), so a run
    // in a region of its own (a tag's pool) leaves whole and nothing of it stays.
    const device_address head_page = seg->addr + (first->addr - seg->addr) / page * page;
    const device_address tail_page = seg->addr + round_up(run_end - seg->addr, page);
    block* const free_before = first->prev;
    block* const free_after = last->next;
    const bool head_free = head_page < first->addr && free_and_idle(free_before) && free_before->addr <= head_page;
    const bool tail_free =
        run_end < tail_page && free_and_idle(free_after) && free_after->addr + free_after->bytes >= tail_page;
    device_address lo = head_free ? head_page : seg->addr + round_up(first->addr - seg->addr, page);
    device_address hi = tail_free ? tail_page : seg->addr + (run_end - seg->addr) / page * page;
    if (hi > lo) {  // a restored range's chunks leave whole or stay whole (device::unmap_span)
      const byte_range span = device_.unmap_span(lo, hi);
      lo = span.addr;
      hi = span.addr + span.bytes;
    }
    std::size_t kept_bytes = 0;  // of the run's blocks, outside [lo, hi)
    for (const block* b = first;; b = b->next) {
      const device_address from = std::max(b->addr, lo);
      const device_address to = std::min(b->addr + b->bytes, hi);
      kept_bytes += b->bytes - (from < to ? to - from : 0);
      if (b == last) break;
    }
    if (hi <= lo) {  // no whole page: everything stays
      done.kept_bytes += kept_bytes;
      stats_.offload_kept_bytes += static_cast<std::int64_t>(kept_bytes);
      trace_run(first, last);
      continue;
    }
    const std::size_t budget = options_.offload_host_budget_bytes;
    std::size_t held = static_cast<std::size_t>(stats_.offloaded_bytes[stat_type::all].current);
    if (moves_in_flight_ != 0) {  // offloads in flight hold host memory too
      for (const auto& [at, r] : offloaded_) held += r.in_flight != 0 && !r.restoring ? r.bytes : 0;
    }
    if (budget != 0 && held + (hi - lo) > budget) {
      return offload_error{errc::out_of_memory,
                           fmt::format("offload of the {} block(s) [{:#x}, {:#x}) would hold {} bytes on the host, "
                                       "over offload_host_budget ({} bytes, {} held now); they stay on the device",
                                       count, first->addr, run_end, held + (hi - lo), budget, held),
                           done};
    }
    const std::vector<byte_range> live = copy_ranges(first, lo, hi, options, named_addrs);
    const std::vector<event_id> after = events_for(first, run_end);
    const errc e = device_.offload_start(lo, hi - lo, live, after);
    recycle_events(after);
    if (e != errc::ok) {
      const std::string why = device_.last_failure();
      return offload_error{e,
                           fmt::format("offload of the {} block(s) [{:#x}, {:#x}) (pages [{:#x}, +{})) on device '{}': "
                                       "{}{}{}; they stay on the device",
                                       count, first->addr, run_end, lo, hi - lo, device_.name(), to_string(e),
                                       why.empty() ? "" : ": ", why),
                           done};
    }
    block* range_first = lo < first->addr ? carve_free_edge(free_before, lo, hi) : first;
    if (hi > run_end) carve_free_edge(free_after, lo, hi);
    std::size_t live_blocks = 0;
    for (block* b = range_first; b != nullptr && b->addr < hi; b = b->next) {
      if (!overlaps(b, lo, hi)) continue;
      b->offloaded = true;
      if (is_live(b)) ++live_blocks;
    }
    std::vector<device_address> run_named;
    for (const block* b = first;; b = b->next) {
      if (is_live(b)) run_named.push_back(b->addr);
      if (b == last) break;
    }
    const auto it = offloaded_.emplace(lo, offloaded_range{.addr = lo,
                                                          .bytes = hi - lo,
                                                          .seg = seg,
                                                          .live_blocks = live_blocks,
                                                          .in_flight = call,
                                                          .restoring = false,
                                                          .named = std::move(run_named)})
                        .first;
    ++moves_in_flight_;
    stats_.offload_kept_bytes += static_cast<std::int64_t>(kept_bytes);
    done.blocks += live_blocks;
    done.ranges += 1;
    done.page_bytes += hi - lo;
    done.copied_bytes += total_bytes(live);
    done.kept_bytes += kept_bytes;
    if (non_blocking) {
      done.ticket = call;
    } else if (const errc landed = land(it); landed != errc::ok) {
      offloaded_range failed;  // land erased it
      failed.addr = lo;
      failed.bytes = hi - lo;
      return landing_error(failed, landed, done);
    }
  }
  after_operation();
  return done;
}

void engine_impl::book_offloaded(offloaded_range& r) {
  const auto bytes = static_cast<std::int64_t>(r.bytes);
  r.seg->offloaded_bytes += r.bytes;
  stats_.reserved_bytes.decrease(r.seg->small, bytes);
  stats_.offloaded_bytes.increase(r.seg->small, bytes);
  ++stats_.num_offloads;
  phases_.current_stats().offloaded_bytes += bytes;
  emit(trace_op::segment_unmap, r.addr, r.bytes, r.bytes, r.seg->stream);  // the device's memory went back
}

void engine_impl::unflag_range(const offloaded_range& r) {
  for (block* b = first_block_in(r); b != nullptr;) {
    block* next = b->next;  // read before b merges: a free block after the range may merge into it
    const bool last = next == nullptr || next->addr >= r.end();
    b->offloaded = false;
    if (b->state == block_state::offloaded_free) {  // freed while away: now an ordinary free block
      b->state = block_state::free;
      block* merged = merge_neighbours(b);
      pools_[merged->seg->pool].insert(merged);
    }
    if (last) break;
    b = next;
  }
}

errc engine_impl::land(std::map<device_address, offloaded_range>::iterator it) {
  offloaded_range& r = it->second;
  PHASEALLOC_ASSERT(r.in_flight != 0, "range {:#x} has no move in flight to finish", r.addr);
  std::vector<event_id> after;  // an offload's mapping changes under the streams that used its blocks
  if (!r.restoring) after = events_for(first_block_in(r), r.end());
  const errc e = device_.finish_move(r.addr, after);
  recycle_events(after);
  if (e != errc::ok && r.restoring) return e;  // the device keeps it in flight: nothing is dropped
  --moves_in_flight_;
  const std::uint64_t call = r.in_flight;
  r.in_flight = 0;
  if (e != errc::ok || r.restoring) {  // an offload undone (device pages kept), or a restore done
    const offloaded_range gone = r;
    offloaded_.erase(it);
    unflag_range(gone);
    return e;
  }
  book_offloaded(r);
  for (const device_address addr : r.named) {  // the call's blocks, as named (those still live)
    if (const block* b = live_.find(addr)) emit(trace_op::offload, b->addr, call, b->bytes, b->seg->stream);
  }
  r.named.clear();
  if (r.live_blocks == 0) drop_range(it);  // its last live block went while the copies ran
  return errc::ok;
}

offload_error engine_impl::landing_error(const offloaded_range& r, errc e, const offload_outcome& done) {
  const std::string why = device_.last_failure();
  return offload_error{e,
                       fmt::format("finishing the {} of pages [{:#x}, +{}) on device '{}': {}{}{}; {}",
                                   r.restoring ? "restore" : "offload", r.addr, r.bytes, device_.name(), to_string(e),
                                   why.empty() ? "" : ": ", why,
                                   r.restoring ? "the move stays in flight and its bytes stay on the host"
                                               : "its blocks stay on the device, contents intact"),
                       done};
}

result<bool, offload_error> engine_impl::finish_moves(std::uint64_t ticket, bool wait) {
  bool left = false;
  for (auto it = offloaded_.begin(); it != offloaded_.end();) {
    const auto next = std::next(it);  // land erases at most `it`
    const offloaded_range r = it->second;
    if (r.in_flight == 0 || (ticket != 0 && r.in_flight != ticket)) {
      it = next;
      continue;
    }
    if (!wait) {
      const result<bool> copied = device_.move_done(r.addr);
      if (!copied) return landing_error(r, copied.error(), {});
      if (!copied.value()) {
        left = true;
        it = next;
        continue;
      }
    }
    if (const errc e = land(it); e != errc::ok) return landing_error(r, e, {});
    it = next;
  }
  return !left;
}

std::optional<offload_error> engine_impl::take_unreported_move_error() {
  if (!unreported_move_error_) return std::nullopt;
  offload_error e = std::move(*unreported_move_error_);
  unreported_move_error_.reset();
  e.message = fmt::format("an earlier non-blocking move failed: {}", e.message);
  return e;
}

result<bool, offload_error> engine_impl::land_done_moves() {
  if (std::optional<offload_error> e = take_unreported_move_error()) return std::move(*e);
  if (moves_in_flight_ == 0) return true;
  return finish_moves(0, /*wait=*/false);
}

void engine_impl::land_moves_quietly(bool wait) {
  if (moves_in_flight_ == 0) return;
  auto r = finish_moves(0, wait);
  if (!r && !unreported_move_error_) unreported_move_error_ = std::move(r.error());
}

errc engine_impl::order_after_moves(std::uint64_t ticket, stream_id stream) {
  for (const auto& [addr, r] : offloaded_) {
    if (r.in_flight == 0 || (ticket != 0 && r.in_flight != ticket)) continue;
    if (const errc e = device_.order_after_move(addr, stream); e != errc::ok) return e;
  }
  return errc::ok;
}

errc engine_impl::restore_range(std::map<device_address, offloaded_range>::iterator it, offload_outcome& done,
                                std::uint64_t call, const move_options& options,
                                std::span<const device_address> lent) {
  const bool non_blocking = options.non_blocking;
  offloaded_range& r = it->second;
  const auto bytes = static_cast<std::int64_t>(r.bytes);
  if (limit() != 0 && static_cast<std::size_t>(stats_.reserved_bytes[stat_type::all].current) + r.bytes > limit()) {
    return errc::out_of_memory;  // the memory fraction holds for restores too
  }
  block* first = first_block_in(r);
  const std::vector<byte_range> live = copy_ranges(first, r.addr, r.end(), options, lent);
  const std::vector<event_id> after = events_for(first, r.end());
  const errc e = device_.restore_start(r.addr, r.bytes, live, after);
  recycle_events(after);
  if (e != errc::ok) return e;
  // The device's memory from here (its bytes arrive with the copies): booked as restored.
  r.seg->offloaded_bytes -= r.bytes;
  stats_.offloaded_bytes.decrease(r.seg->small, bytes);
  stats_.reserved_bytes.increase(r.seg->small, bytes);
  ++stats_.num_restores;
  phases_.current_stats().restored_bytes += bytes;
  emit(trace_op::segment_map, r.addr, r.bytes, r.bytes, r.seg->stream);
  std::size_t blocks = 0;
  bool named = false;
  for (const block* b = first; b != nullptr && b->addr < r.end(); b = b->next) {
    ++blocks;
    if (is_live(b) && !named) {  // one live block names the range to a replay
      emit(trace_op::restore, b->addr, call, b->bytes, b->seg->stream);
      named = true;
    }
  }
  observe_levels(false);  // reserved rose: a peak inside the operation counts
  r.in_flight = call;
  r.restoring = true;
  ++moves_in_flight_;
  if (non_blocking) {  // the streams that use the blocks see the bytes: they wait for the copies
    for (const stream_id s : streams_of(first, r.end())) {
      if (device_.order_after_move(r.addr, s) != errc::ok) return land(it);  // the copies waited for instead
    }
  }
  done.blocks += blocks;
  done.ranges += 1;
  done.page_bytes += r.bytes;
  done.copied_bytes += total_bytes(live);
  if (non_blocking) {
    done.ticket = call;
    return errc::ok;
  }
  return land(it);
}

result<offload_outcome, offload_error> engine_impl::restore(std::span<const device_address> addrs,
                                                            const move_options& options) {
  settle();
  offload_outcome done;
  if (device_calls_held_) {
    return offload_error{errc::invalid_argument,
                         "restore while a CUDA graph capture (or a pool route) is under way on the device: nothing "
                         "was restored (the offloaded bytes stay correct on the host)",
                         done};
  }
  if (auto landed = land_done_moves(); !landed) return landed.error();
  std::vector<device_address> lent;  // sorted: the blocks copy_only narrows
  if (options.copy_only) {
    lent.assign(addrs.begin(), addrs.end());
    std::sort(lent.begin(), lent.end());
  }
  const std::uint64_t call = ++move_calls_;
  std::set<device_address> ranges;  // by start: each range once, in address order
  if (addrs.empty()) {
    for (const auto& [addr, r] : offloaded_) ranges.insert(addr);
  }
  for (const device_address addr : addrs) {
    const block* b = live_.find(addr);
    if (b == nullptr) {
      return offload_error{errc::unknown_pointer,
                           fmt::format("restore of {:#x}: no allocated block starts there: nothing was restored", addr),
                           done};
    }
    if (b->offloaded) ranges.insert(range_of(b)->first);
  }
  // Cached free memory first, as much as the restore maps (the policy's before_restore): a range
  // comes back at its own addresses, so it cannot reuse the cache, and the two together would
  // hold more than the device's live bytes need. Not for a non-blocking restore: unmapping free
  // pages waits for the device first, which its caller asked not to do.
  std::size_t coming_back = 0;
  for (const device_address start : ranges) {
    const auto it = offloaded_.find(start);
    if (it != offloaded_.end() && !(it->second.in_flight != 0 && it->second.restoring)) coming_back += it->second.bytes;
  }
  if (coming_back > 0 && !options.non_blocking) run_plan(policy_.before_restore(coming_back));
  for (const device_address start : ranges) {
    // A range can go while others are restored: the release below may complete a pending free
    // that was its last live block (free_offloaded drops it).
    auto it = offloaded_.find(start);
    if (it == offloaded_.end()) continue;
    if (it->second.in_flight != 0) {
      if (it->second.restoring) continue;  // coming back already
      const offloaded_range r = it->second;  // an offload in flight lands first, then comes back
      if (const errc e = land(it); e != errc::ok) {
        after_operation();
        return landing_error(r, e, done);
      }
      it = offloaded_.find(start);
      if (it == offloaded_.end()) continue;
    }
    errc e = restore_range(it, done, call, options, lent);
    if (e == errc::out_of_memory) {
      run_plan(policy_.on_empty_cache());  // cached memory is worth less than live bytes on the host
      it = offloaded_.find(start);
      if (it == offloaded_.end()) continue;
      e = restore_range(it, done, call, options, lent);
    }
    if (e != errc::ok) {
      if (e == errc::out_of_memory) ++stats_.num_restore_ooms;
      const offloaded_range& r = offloaded_.find(start)->second;
      const std::string why = device_.last_failure();
      after_operation();
      const char* where = device_.caps().has_host_backing
                              ? "on the host at the same addresses (correct, slower)"
                              : "on the host, the range unmapped (do not touch it until a restore succeeds)";
      return offload_error{e,
                           fmt::format("restore of pages [{:#x}, +{}) on device '{}': {}{}{}; their bytes stay {}, and "
                                       "a later restore may succeed",
                                       r.addr, r.bytes, device_.name(), to_string(e), why.empty() ? "" : ": ", why,
                                       where),
                           done};
    }
  }
  after_operation();
  return done;
}

void engine_impl::free_offloaded(block* b) {
  b->state = block_state::offloaded_free;
  auto it = range_of(b);
  PHASEALLOC_ASSERT(it->second.live_blocks > 0, "offloaded range {:#x} counts no live block", it->first);
  if (--it->second.live_blocks != 0) return;
  if (it->second.in_flight == 0) {
    drop_range(it);
    return;
  }
  // Its copies may still read or write the pages: the move finishes first, then an offload's
  // range is dropped (land does it) and a restore's blocks return to the pools.
  const offloaded_range r = it->second;
  if (const errc e = land(it); e != errc::ok && !unreported_move_error_) {
    unreported_move_error_ = landing_error(r, e, {});
  }
}

void engine_impl::drop_range(std::map<device_address, offloaded_range>::iterator it) {
  const offloaded_range r = it->second;
  const errc e = device_.unmap(r.addr, r.bytes);
  PHASEALLOC_CHECK(e == errc::ok, "device '{}' refused to unmap the offloaded range [{:#x}, +{}): {}", device_.name(),
                   r.addr, r.bytes, to_string(e));
  offloaded_.erase(it);
  count_device(&device_stats::num_device_unmap, &phase_stats::num_device_unmap);
  segment* seg = r.seg;
  seg->offloaded_bytes -= r.bytes;
  seg->mapped_bytes -= r.bytes;
  stats_.offloaded_bytes.decrease(seg->small, static_cast<std::int64_t>(r.bytes));
  // The range's blocks, all offloaded_free, become one block, carved into [free][unmapped][free].
  block* b = first_block_in(r);
  PHASEALLOC_ASSERT(b->state == block_state::offloaded_free, "block {:#x} of a dropped range is live", b->addr);
  while (b->next != nullptr && b->next->addr < r.end()) {
    block* n = b->next;
    PHASEALLOC_ASSERT(n->state == block_state::offloaded_free, "block {:#x} of a dropped range is live", n->addr);
    b->bytes += n->bytes;
    b->next = n->next;
    if (n->next != nullptr) n->next->prev = b;
    arena_.recycle(n);
  }
  b->offloaded = false;
  b->state = block_state::free;
  block* head = r.addr > b->addr ? split_front(b, r.addr - b->addr) : nullptr;
  block* mid = r.end() < b->addr + b->bytes ? split_front(b, r.bytes) : b;
  block* tail = mid != b ? b : nullptr;
  mid->state = block_state::unmapped;
  for (block* piece : {head, tail}) {
    if (piece == nullptr) continue;
    block* merged = merge_neighbours(piece);
    pools_[seg->pool].insert(merged);
  }
  merge_neighbours(mid);
}

}  // namespace phasealloc::detail
