// Seeding: booking a layout that existed before the engine's history began (engine::seed).
//
// Design note
// Rationale: most PyTorch snapshots are taken mid-run or hold state only. Replaying them from an
//   empty engine re-creates the starting live set with the policy's own placement, which for the
//   `pytorch` model means other segments (and other peaks) than the recording allocator had. The
//   recorded layout says exactly which segments existed and how they were split.
// Approach: for each seed_segment, reserve its bytes on the device (and map them on a device with
//   virtual reserve), book it as add_segment() does, then split its one block front to back into
//   the recorded blocks: allocated ones go live (with the stats allocate() keeps), free ones into
//   the pool, adjacent free blocks merged (the engine merges eagerly). An expandable segment becomes
//   a reservation of its span or of the pool's usual size, whichever is larger, with only its
//   mapped blocks mapped. Nothing here runs on the allocation path, so a replay that does not seed
//   behaves exactly as before.
// Limitations: device calls of the seeding are not counted (they happened before the recording);
//   the device still charges its modelled time for them. Segment addresses are the device's, not
//   the recorded ones; their order is kept. Pending frees are booked as free.
#include <algorithm>

#include <fmt/format.h>

#include "engine_impl.hpp"
#include "phasealloc/check.hpp"

namespace phasealloc::detail {
namespace {

std::size_t span_bytes(const seed_segment& s) {
  std::size_t n = 0;
  for (const seed_block& b : s.blocks) n += b.bytes;
  return n;
}

/// The blocks with neighbouring free blocks (pending frees read as free) merged, and neighbouring
/// unmapped ones: the engine merges eagerly.
std::vector<seed_block> coalesced(const std::vector<seed_block>& in) {
  std::vector<seed_block> out;
  out.reserve(in.size());
  for (seed_block b : in) {
    if (b.state == block_state::pending_free) b.state = block_state::free;
    if (b.state != block_state::allocated) b.requested_bytes = 0;
    if (!out.empty() && b.state != block_state::allocated && out.back().state == b.state) {
      out.back().bytes += b.bytes;
      continue;
    }
    out.push_back(b);
  }
  return out;
}

/// Splits a seed_segment into its mapped runs, each a seed_segment with no unmapped block.
std::vector<seed_segment> mapped_runs(const seed_segment& s) {
  std::vector<seed_segment> runs;
  bool open = false;
  for (const seed_block& b : s.blocks) {
    if (b.state == block_state::unmapped) {
      open = false;
      continue;
    }
    if (!open) runs.push_back(seed_segment{s.stream, s.small, false, {}});  // NOLINT(modernize-use-emplace)
    open = true;
    runs.back().blocks.push_back(b);
  }
  return runs;
}

}  // namespace

result<std::vector<device_address>, std::string> engine_impl::seed(const std::vector<seed_segment>& segments) {
  if (!segments_.empty()) return std::string("seed: the engine already holds segments (seed an empty engine)");
  std::vector<seed_segment> plain;  // expandable segments split into runs where the pool is not expandable
  std::vector<std::pair<const seed_segment*, pool_id>> work;
  const auto pool_of = [&](const seed_segment& s) {
    std::optional<pool_id> same_smallness;
    for (pool_id p = 0; p < pool_traits_.size(); ++p) {
      if (pool_traits_[p].small != s.small) continue;
      if (pool_traits_[p].expandable == s.expandable) return p;
      if (!same_smallness) same_smallness = p;
    }
    return same_smallness.value_or(pool_id{0});
  };
  plain.reserve(segments.size() * 2);
  for (const seed_segment& s : segments) {
    if (s.blocks.empty()) return fmt::format("seed: segment {} has no blocks", &s - segments.data());
    for (const seed_block& b : s.blocks) {
      if (b.bytes == 0) return fmt::format("seed: segment {} has a block of 0 bytes", &s - segments.data());
      if (b.state == block_state::unmapped && !s.expandable) {
        return fmt::format("seed: segment {} is not expandable but has an unmapped block", &s - segments.data());
      }
    }
    const pool_id pool = pool_of(s);
    if (s.expandable && !pool_traits_[pool].expandable) {
      for (seed_segment& run : mapped_runs(s)) plain.push_back(std::move(run));
      continue;
    }
    work.emplace_back(&s, pool);
  }
  for (const seed_segment& s : plain) work.emplace_back(&s, pool_of(s));

  std::vector<device_address> placed;
  for (const auto& [s, pool] : work) {
    const std::size_t span = span_bytes(*s);
    const bool expandable = s->expandable && pool_traits_[pool].expandable;
    const std::size_t page = expandable ? pool_traits_[pool].page_bytes : device_.caps().granularity_bytes;
    std::size_t reserve_bytes = span;
    if (expandable) {
      reserve_bytes = std::max(span, device_.caps().capacity_bytes + device_.caps().capacity_bytes / 8);
      reserve_bytes = round_up(reserve_bytes, page);
    } else if (span % page != 0) {
      return fmt::format("seed: a segment of {} bytes is not a multiple of the device granularity {}", span, page);
    }
    const result<device_address> addr = device_.reserve(reserve_bytes);
    if (!addr) return fmt::format("seed: the device refused to reserve {} bytes", reserve_bytes);
    if (!expandable && device_.caps().has_virtual_reserve && device_.map(addr.value(), span) != errc::ok) {
      return fmt::format("seed: the device refused to map {} bytes", span);
    }
    segment* seg = add_segment(addr.value(), reserve_bytes, pool, s->stream, expandable);
    if (expandable) {
      std::vector<segment*>& list = expandable_[{pool, s->stream}];
      list.insert(std::upper_bound(list.begin(), list.end(), seg,
                                   [](const segment* a, const segment* b) { return a->addr < b->addr; }),
                  seg);
    }
    // Cut the segment's one block front to back; what is left of an expandable reservation stays unmapped.
    const std::vector<seed_block> blocks = coalesced(s->blocks);
    block* rest = seg->first;
    for (const seed_block& sb : blocks) {
      PHASEALLOC_CHECK(rest != nullptr && sb.bytes <= rest->bytes, "seed: blocks beyond the segment's {} bytes",
                       reserve_bytes);
      block* b = sb.bytes < rest->bytes ? split_front(rest, sb.bytes) : rest;
      b->state = sb.state;
      if (b == rest) rest = nullptr;
    }
    // Map the mapped runs of an expandable reservation, whole pages.
    if (expandable) {
      for (block* b = seg->first; b != nullptr;) {
        if (b->state == block_state::unmapped) {
          b = b->next;
          continue;
        }
        block* run_end = b;
        std::size_t run_bytes = 0;
        for (block* w = b; w != nullptr && w->state != block_state::unmapped; w = w->next) {
          run_bytes += w->bytes;
          run_end = w;
        }
        if ((b->addr - seg->addr) % page != 0 || run_bytes % page != 0) {  // pages count from the reservation
          return fmt::format("seed: a mapped run of {} bytes at offset {} of an expandable segment is not on {}-byte "
                             "pages",
                             run_bytes, b->addr - seg->addr, page);
        }
        if (device_.map(b->addr, run_bytes) != errc::ok) {
          return fmt::format("seed: the device refused to map {} bytes", run_bytes);
        }
        seg->mapped_bytes += run_bytes;
        stats_.reserved_bytes.increase(seg->small, static_cast<std::int64_t>(run_bytes));
        b = run_end->next;
      }
    }
    // Book the blocks: allocated ones live, free ones cached.
    std::size_t index = 0;
    for (block* b = seg->first; b != nullptr; b = b->next, ++index) {
      if (b->state == block_state::allocated) {
        const seed_block& sb = blocks[index];
        b->requested_bytes = sb.requested_bytes;
        live_.emplace(b->addr, b);
        live_bytes_by_interval_[b->birth_interval] += b->bytes;
        placed.push_back(b->addr);
        const auto size = static_cast<std::int64_t>(b->bytes);
        stats_.allocation.increase(seg->small, 1);
        stats_.allocated_bytes.increase(seg->small, size);
        stats_.active.increase(seg->small, 1);
        stats_.active_bytes.increase(seg->small, size);
        stats_.requested_bytes.increase(seg->small, static_cast<std::int64_t>(sb.requested_bytes));
      } else if (b->state == block_state::free) {
        pools_[pool].insert(b);
      }
    }
  }
  after_operation();
  return placed;
}

}  // namespace phasealloc::detail
