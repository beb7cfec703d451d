// Releasing cached memory back to the device: the mechanism behind every release plan.
//
// Design note
// Rationale: policies decide *what* to release (which pools and streams, how much, in which
//   order); this file decides *how*, so every policy's release has the same exact books.
// Approach: a step collects the idle segments that match its filters (no allocated or pending
//   block), orders them, and releases until the target is met. A segment of an expandable pool,
//   or any step asking for free_pages, gives back pages instead: every page wholly inside a free
//   block is unmapped and the block is split around it; the reservation stays. A page run
//   qualifies from min_run_bytes, or from stale_min_run_bytes when its block has been free since
//   before the current phase began (its free_epoch, stamped when it entered its pool, is older).
//   Before the first unmap of a step the device is synchronised, because a free block's last
//   kernels may still be in flight on its stream (cudaFree synchronises by itself; cuMemUnmap
//   does not).
// Limitations: a non-expandable segment whose pages were unmapped is served again only once it
//   is idle and released; reusing its holes in place is left to a stitching policy.
#include <algorithm>
#include <tuple>

#include "engine_impl.hpp"
#include "phasealloc/check.hpp"

namespace phasealloc::detail {
namespace {

bool idle(const segment& seg) {
  for (const block* b = seg.first; b != nullptr; b = b->next) {
    if (b->state == block_state::allocated || b->state == block_state::pending_free || b->event_count != 0) {
      return false;
    }
  }
  return true;
}

/// Rank of `pool` in a size_index step: its place in pool_order, unlisted pools after, by id.
std::size_t pool_rank(const release_step& step, pool_id pool) {
  const auto it = std::find(step.pool_order.begin(), step.pool_order.end(), pool);
  return it != step.pool_order.end() ? static_cast<std::size_t>(it - step.pool_order.begin())
                                     : step.pool_order.size() + pool;
}

}  // namespace

std::size_t engine_impl::run_plan(const release_plan& plan) {
  settle();
  forget_policy_answers();  // the plan's hook (on_empty_cache, ...) may have changed the policy
  std::size_t released = 0;
  for (const release_step& step : plan) released += run_step(step);
  return released;
}

std::size_t engine_impl::release_segment(segment* seg) {
  const bool virtual_reserve = device_.caps().has_virtual_reserve;
  std::size_t unmapped = 0;
  for (block* b = seg->first; b != nullptr;) {
    block* next = b->next;
    if (b->state == block_state::free) {
      pools_[seg->pool].erase(b);
      if (virtual_reserve) {
        const errc e = device_.unmap(b->addr, b->bytes);
        PHASEALLOC_CHECK(e == errc::ok, "device '{}' refused to unmap [{:#x}, +{}): {}", device_.name(), b->addr,
                         b->bytes, to_string(e));
        count_device(&device_stats::num_device_unmap, &phase_stats::num_device_unmap);
      }
      unmapped += b->bytes;
    }
    arena_.recycle(b);
    b = next;
  }
  PHASEALLOC_CHECK(unmapped == seg->mapped_bytes, "segment {:#x}: unmapped {} of {} mapped bytes", seg->addr, unmapped,
                   seg->mapped_bytes);
  const errc e = device_.release(seg->addr, seg->bytes);
  PHASEALLOC_CHECK(e == errc::ok, "device '{}' refused to release segment [{:#x}, +{}): {}", device_.name(),
                   seg->addr, seg->bytes, to_string(e));
  count_device(&device_stats::num_device_free, &phase_stats::num_device_free);
  stats_.segment.decrease(seg->small, 1);
  stats_.reserved_bytes.decrease(seg->small, static_cast<std::int64_t>(unmapped));
  phases_.current_stats().released_bytes += static_cast<std::int64_t>(unmapped);
  if (seg->expandable) {
    // No event: its reservation had none either (torch's history shows only maps and unmaps).
    std::vector<segment*>& list = expandable_[{seg->pool, seg->stream}];
    list.erase(std::find(list.begin(), list.end(), seg));
  } else {
    emit(trace_op::segment_free, seg->addr, seg->bytes, seg->bytes, seg->stream);
  }
  segments_.erase(seg->addr);
  return unmapped;
}

std::size_t engine_impl::page_bytes_of(const segment& seg) const {
  return seg.expandable ? pool_traits_[seg.pool].page_bytes : device_.caps().granularity_bytes;
}

std::size_t engine_impl::unmap_block_pages(block* b, std::size_t limit_bytes) {
  segment* seg = b->seg;
  const std::size_t page = page_bytes_of(*seg);
  device_address lo = seg->addr + round_up(b->addr - seg->addr, page);
  const device_address hi = seg->addr + (b->addr + b->bytes - seg->addr) / page * page;
  if (hi <= lo) return 0;
  if (limit_bytes < hi - lo) lo = hi - round_up(limit_bytes, page);
  // A device that mapped part of the block in a handle larger than a page (a restored range)
  // unmaps that handle whole or not at all.
  const byte_range span = device_.unmap_span(lo, hi);
  if (span.bytes == 0) return 0;
  lo = span.addr;
  const device_address hi_unmapped = span.addr + span.bytes;
  pools_[seg->pool].erase(b);
  // Carve b into [head free][mid unmapped][tail free]; head and tail go back to the pool.
  block* head = lo > b->addr ? split_front(b, lo - b->addr) : nullptr;
  block* mid = hi_unmapped < b->addr + b->bytes ? split_front(b, hi_unmapped - lo) : b;
  block* tail = mid != b ? b : nullptr;
  const errc e = device_.unmap(mid->addr, mid->bytes);
  PHASEALLOC_CHECK(e == errc::ok, "device '{}' refused to unmap [{:#x}, +{}): {}", device_.name(), mid->addr,
                   mid->bytes, to_string(e));
  count_device(&device_stats::num_device_unmap, &phase_stats::num_device_unmap);
  const std::size_t bytes = mid->bytes;
  seg->mapped_bytes -= bytes;
  stats_.reserved_bytes.decrease(seg->small, static_cast<std::int64_t>(bytes));
  phases_.current_stats().released_bytes += static_cast<std::int64_t>(bytes);
  emit(trace_op::segment_unmap, mid->addr, bytes, bytes, seg->stream);
  mid->state = block_state::unmapped;
  if (head != nullptr) pools_[seg->pool].insert(head);
  if (tail != nullptr) pools_[seg->pool].insert(tail);
  merge_neighbours(mid);
  return bytes;
}

std::size_t engine_impl::run_step(const release_step& step) {
  if (device_calls_held_) return 0;  // a capture is under way: nothing is freed or waited on
  if (step.synchronize && !pending_.empty()) {
    synchronize_pending();
    ++stats_.num_sync_all_streams;
  }
  const bool pages = step.what == release_what::free_pages;
  const bool can_unmap_pages = device_.caps().has_virtual_reserve && device_.caps().has_partial_unmap;

  struct candidate {
    segment* seg;
    std::size_t bytes;  // what releasing it would give back
    std::uint64_t age;
  };
  std::vector<candidate> whole;     // idle segments, released entirely
  std::vector<segment*> page_wise;  // segments that give back free pages
  for (const auto& [addr, owned] : segments_) {
    segment* seg = owned.get();
    if (step.pool && seg->pool != *step.pool) continue;
    if (step.stream && seg->stream != *step.stream) continue;
    if (pool_traits_[seg->pool].pinned && !step.include_pinned) continue;
    if (seg->mapped_bytes < step.min_segment_bytes) continue;
    if (seg->expandable || (pages && can_unmap_pages)) {
      if (seg->mapped_bytes > 0) page_wise.push_back(seg);
    } else if (idle(*seg)) {
      whole.push_back({seg, seg->mapped_bytes, pools_[seg->pool].lookups() - seg->first->free_since});
    }
  }

  // Page-wise: every free block whose whole pages form a run of at least min_run_bytes, in
  // address order or largest first; an idle non-expandable segment goes back whole.
  std::size_t released = 0;
  struct run {
    block* b;
    std::size_t bytes;
  };
  std::vector<run> runs;
  std::vector<segment*> idle_segments;
  for (segment* seg : page_wise) {
    const std::size_t page = page_bytes_of(*seg);
    if (!seg->expandable && idle(*seg)) {
      idle_segments.push_back(seg);
      continue;
    }
    for (block* b = seg->first; b != nullptr; b = b->next) {
      if (b->state != block_state::free || b->event_count != 0) continue;
      const std::size_t lo = round_up(b->addr - seg->addr, page);
      const std::size_t hi = (b->addr + b->bytes - seg->addr) / page * page;
      if (hi <= lo) continue;
      std::size_t min_run = std::max<std::size_t>(step.min_run_bytes, 1);
      if (step.stale_min_run_bytes != 0 && b->free_epoch < phase_epoch_) {
        min_run = std::min(min_run, step.stale_min_run_bytes);
      }
      if (hi - lo >= min_run) runs.push_back({b, hi - lo});
    }
  }
  if (!runs.empty() || !idle_segments.empty()) {
    if (device_.caps().has_virtual_reserve) (void)device_.synchronize();
    if (step.order == release_order::size_index) {
      const auto key = [&](const run& r) {
        return std::tuple(pool_rank(step, r.b->seg->pool), r.b->seg->stream, r.b->bytes, r.b->age_rank, r.b->addr);
      };
      std::sort(runs.begin(), runs.end(), [&](const run& a, const run& b) { return key(a) < key(b); });
    } else if (step.order == release_order::largest_first || step.order == release_order::best_fit_then_largest) {
      std::stable_sort(runs.begin(), runs.end(), [](const run& a, const run& b) { return a.bytes > b.bytes; });
    } else if (step.order == release_order::smallest_first) {
      std::stable_sort(runs.begin(), runs.end(), [](const run& a, const run& b) { return a.bytes < b.bytes; });
    }
    for (segment* seg : idle_segments) {
      if (released >= step.target_bytes) break;
      released += release_segment(seg);
    }
    for (const run& r : runs) {
      if (released >= step.target_bytes) break;
      released += unmap_block_pages(r.b, step.target_bytes - released);  // other runs are untouched
    }
    if (step.release_empty_reservations) {
      // An expandable reservation this step left with nothing mapped goes back; one that was
      // empty before stays.
      for (segment* seg : page_wise) {
        if (seg->expandable && seg->mapped_bytes == 0) (void)release_segment(seg);
      }
    }
  }
  if (whole.empty() || released >= step.target_bytes) return released;

  if (device_.caps().has_virtual_reserve) (void)device_.synchronize();
  // The size-index key (pool rank, stream, size, age rank, address); `whole` is in address order
  // so far.
  const auto index_key = [&](const candidate& c) {
    return std::tuple(pool_rank(step, c.seg->pool), c.seg->stream, c.bytes, c.seg->age_rank, c.seg->addr);
  };
  const auto by_index = [&](const candidate& a, const candidate& b) { return index_key(a) < index_key(b); };
  const auto release_in = [&](const std::vector<candidate>& order) {
    for (const candidate& c : order) {
      if (released >= step.target_bytes) break;
      released += release_segment(c.seg);
    }
  };
  switch (step.order) {
    case release_order::address:
      release_in(whole);
      break;
    case release_order::size_index:
      std::sort(whole.begin(), whole.end(), by_index);
      release_in(whole);
      break;
    case release_order::largest_first:
      std::stable_sort(whole.begin(), whole.end(), [](const candidate& a, const candidate& b) { return a.bytes > b.bytes; });
      release_in(whole);
      break;
    case release_order::smallest_first:
      std::stable_sort(whole.begin(), whole.end(), [](const candidate& a, const candidate& b) { return a.bytes < b.bytes; });
      release_in(whole);
      break;
    case release_order::best_fit_then_largest: {
      const auto fit = std::min_element(whole.begin(), whole.end(), [&](const candidate& a, const candidate& b) {
        const bool a_fits = a.bytes >= step.target_bytes;
        const bool b_fits = b.bytes >= step.target_bytes;
        if (a_fits != b_fits) return a_fits;
        return by_index(a, b);  // the smallest, first in the size index among equals
      });
      if (fit->bytes >= step.target_bytes) {
        released += release_segment(fit->seg);
      } else {
        // Largest first, walking the size index backwards: among equal sizes the last in it first.
        std::sort(whole.begin(), whole.end(), [&](const candidate& a, const candidate& b) { return by_index(b, a); });
        release_in(whole);
      }
      break;
    }
    case release_order::aged: {
      // PyTorch's garbage collection: each pass releases every segment cached at least as long
      // as the mean age of the candidates (compared exactly: age * count >= total age), then the
      // mean is recomputed over what is left; the target is checked between passes only.
      std::sort(whole.begin(), whole.end(), by_index);
      while (released < step.target_bytes && !whole.empty()) {
        std::uint64_t total_age = 0;
        for (const candidate& c : whole) total_age += c.age;
        std::vector<candidate> kept;
        for (const candidate& c : whole) {
          if (c.age * whole.size() >= total_age) {
            released += release_segment(c.seg);
          } else {
            kept.push_back(c);
          }
        }
        if (kept.size() == whole.size()) break;
        whole = std::move(kept);
      }
      break;
    }
  }
  return released;
}

}  // namespace phasealloc::detail
