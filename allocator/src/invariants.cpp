// The invariant checker (mimalloc's mi_segment_valid in spirit): walks every segment and block
// and recomputes the books from scratch. Tests run it after every operation; it returns one line
// per broken invariant so a test can also assert on it directly.
#include <array>
#include <map>

#include "engine_impl.hpp"

namespace phasealloc::detail {

std::vector<std::string> engine_impl::check_invariants() const {
  std::vector<std::string> broken;
  const auto fail = [&](std::string line) { broken.push_back(std::move(line)); };

  // Totals recomputed from the blocks, per stat type (all, small, large).
  std::array<std::int64_t, 3> allocated{}, active{}, requested{}, reserved{}, segments{}, allocations{}, offloaded{};
  std::size_t free_blocks = 0;
  std::size_t pending_blocks = 0;
  std::vector<std::size_t> live_by_interval(live_bytes_by_interval_.size(), 0);
  device_address previous_end = 0;

  for (const auto& [addr, seg] : segments_) {
    if (addr != seg->addr) fail(fmt::format("segment keyed {:#x} has address {:#x}", addr, seg->addr));
    if (seg->addr < previous_end) fail(fmt::format("segment {:#x} overlaps the previous segment", seg->addr));
    previous_end = seg->end();
    if (seg->first == nullptr || seg->first->prev != nullptr || seg->first->addr != seg->addr) {
      fail(fmt::format("segment {:#x}: first block does not start it", seg->addr));
      continue;
    }
    const std::size_t t = seg->small ? 1 : 2;
    segments[0] += 1;
    segments[t] += 1;
    std::size_t covered = 0;
    std::size_t mapped = 0;
    device_address expect = seg->addr;
    for (const block* b = seg->first; b != nullptr; b = b->next) {
      if (b->seg != seg.get()) fail(fmt::format("block {:#x} points to another segment", b->addr));
      if (b->stream != seg->stream) fail(fmt::format("block {:#x} keeps stream {} of a segment on stream {}", b->addr, b->stream, seg->stream));
      if (b->addr != expect) fail(fmt::format("segment {:#x}: gap or overlap at {:#x} (block starts {:#x})", seg->addr, expect, b->addr));
      if (b->bytes == 0) fail(fmt::format("block {:#x} is empty", b->addr));
      if (b->next != nullptr && b->next->prev != b) fail(fmt::format("block {:#x}: next->prev is not itself", b->addr));
      expect = b->addr + b->bytes;
      covered += b->bytes;
      if (b->state != block_state::unmapped) mapped += b->bytes;
      if (b->offloaded && (b->state == block_state::free || b->state == block_state::unmapped)) {
        fail(fmt::format("block {:#x} is offloaded but {}", b->addr, b->state == block_state::free ? "free" : "unmapped"));
      }
      if (b->state == block_state::offloaded_free && !b->offloaded) fail(fmt::format("offloaded-free block {:#x} is not offloaded", b->addr));
      const auto size = static_cast<std::int64_t>(b->bytes);
      switch (b->state) {
        case block_state::allocated: {
          allocated[0] += size;
          allocated[t] += size;
          active[0] += size;
          active[t] += size;
          requested[0] += static_cast<std::int64_t>(b->requested_bytes);
          requested[t] += static_cast<std::int64_t>(b->requested_bytes);
          allocations[0] += 1;
          allocations[t] += 1;
          if (live_.find(b->addr) != b) fail(fmt::format("allocated block {:#x} is not in the live map", b->addr));
          if (b->birth_interval >= live_by_interval.size()) {
            fail(fmt::format("allocated block {:#x} was born in interval {}, after the current one", b->addr,
                             b->birth_interval));
          } else {
            live_by_interval[b->birth_interval] += b->bytes;
          }
          if (pools_[seg->pool].contains(const_cast<block*>(b))) fail(fmt::format("allocated block {:#x} is in a pool", b->addr));
          break;
        }
        case block_state::pending_free:
          active[0] += size;
          active[t] += size;
          ++pending_blocks;
          if (b->event_count <= 0) fail(fmt::format("pending block {:#x} has no events", b->addr));
          break;
        case block_state::free:
          if (b == deferred_) {
            // The deferred free (deferred_free.cpp): out of its pool, its free neighbour after it
            // unmerged; nothing free before it (that would have merged at once).
            if (pools_[seg->pool].contains(const_cast<block*>(b))) fail(fmt::format("deferred block {:#x} is in a pool", b->addr));
            if (b->prev != nullptr && b->prev->state == block_state::free && b->prev->event_count == 0) {
              fail(fmt::format("deferred block {:#x} follows the free block {:#x}", b->addr, b->prev->addr));
            }
            if (pool_traits_[seg->pool].growth == growth_style::expandable_segments) {
              fail(fmt::format("deferred block {:#x} in a pool ranked with unmapped tails", b->addr));
            }
            break;
          }
          ++free_blocks;
          if (!pools_[seg->pool].contains(const_cast<block*>(b))) fail(fmt::format("free block {:#x} is not in its pool", b->addr));
          if (b->next != nullptr && b->next != deferred_ && b->next->state == block_state::free && b->event_count == 0 && b->next->event_count == 0) {
            fail(fmt::format("free blocks {:#x} and {:#x} are neighbours but not merged", b->addr, b->next->addr));
          }
          break;
        case block_state::offloaded_free:
          if (pools_[seg->pool].contains(const_cast<block*>(b))) fail(fmt::format("offloaded-free block {:#x} is in a pool", b->addr));
          if (b == deferred_) fail(fmt::format("offloaded-free block {:#x} is the deferred free", b->addr));
          break;
        case block_state::unmapped:
          if (!seg->expandable && !device_.caps().has_partial_unmap) fail(fmt::format("block {:#x} is unmapped on a device without partial unmap", b->addr));
          if (b->next != nullptr && b->next->state == block_state::unmapped) {
            fail(fmt::format("unmapped blocks {:#x} and {:#x} are neighbours but not merged", b->addr, b->next->addr));
          }
          break;
      }
    }
    if (covered != seg->bytes) fail(fmt::format("segment {:#x}: blocks cover {} of {} bytes", seg->addr, covered, seg->bytes));
    if (mapped != seg->mapped_bytes) fail(fmt::format("segment {:#x}: {} bytes mapped by blocks, books say {}", seg->addr, mapped, seg->mapped_bytes));
    if (seg->offloaded_bytes > seg->mapped_bytes) fail(fmt::format("segment {:#x}: {} bytes offloaded of {} mapped", seg->addr, seg->offloaded_bytes, seg->mapped_bytes));
    reserved[0] += static_cast<std::int64_t>(mapped - seg->offloaded_bytes);
    reserved[t] += static_cast<std::int64_t>(mapped - seg->offloaded_bytes);
  }

  // Offloaded ranges: whole pages of one segment, disjoint, covered by blocks that carry
  // `offloaded` and count their live ones; every offloaded block overlaps one.
  std::map<const segment*, std::size_t> offloaded_by_segment;
  std::size_t offloaded_blocks = 0;
  std::size_t in_flight = 0;
  device_address previous_range_end = 0;
  for (const auto& [addr, r] : offloaded_) {
    if (addr != r.addr || r.bytes == 0) fail(fmt::format("offloaded range keyed {:#x} is [{:#x}, +{})", addr, r.addr, r.bytes));
    if (r.addr < previous_range_end) fail(fmt::format("offloaded range {:#x} overlaps the previous one", r.addr));
    previous_range_end = r.end();
    if (r.addr < r.seg->addr || r.end() > r.seg->end()) fail(fmt::format("offloaded range {:#x} leaves its segment", r.addr));
    const std::size_t page = page_bytes_of(*r.seg);
    if ((r.addr - r.seg->addr) % page != 0 || r.bytes % page != 0) fail(fmt::format("offloaded range {:#x} is not whole pages", r.addr));
    if (r.in_flight == 0) {  // a range in flight is the device's memory in the books
      offloaded_by_segment[r.seg] += r.bytes;
      const std::size_t t = r.seg->small ? 1 : 2;
      offloaded[0] += static_cast<std::int64_t>(r.bytes);
      offloaded[t] += static_cast<std::int64_t>(r.bytes);
    } else {
      ++in_flight;
    }
    std::size_t live = 0;
    for (const block* b = first_block_in(r); b != nullptr && b->addr < r.end(); b = b->next) {
      if (!b->offloaded) fail(fmt::format("block {:#x} overlaps the offloaded range {:#x} but is not offloaded", b->addr, r.addr));
      if (b->state == block_state::allocated || b->state == block_state::pending_free) ++live;
      ++offloaded_blocks;
    }
    if (live != r.live_blocks) fail(fmt::format("offloaded range {:#x} counts {} live blocks, its blocks {}", r.addr, r.live_blocks, live));
    if (live == 0 && r.in_flight == 0) fail(fmt::format("offloaded range {:#x} has no live block (it should have been dropped)", r.addr));
  }
  if (in_flight != moves_in_flight_) fail(fmt::format("{} offloaded ranges are in flight, books say {}", in_flight, moves_in_flight_));
  std::size_t flagged = 0;
  for (const auto& [addr, seg] : segments_) {
    if (seg->offloaded_bytes != offloaded_by_segment[seg.get()]) {
      fail(fmt::format("segment {:#x}: books say {} bytes offloaded, its ranges {}", seg->addr, seg->offloaded_bytes, offloaded_by_segment[seg.get()]));
    }
    for (const block* b = seg->first; b != nullptr; b = b->next) flagged += b->offloaded ? 1 : 0;
  }
  if (flagged != offloaded_blocks) fail(fmt::format("{} blocks are offloaded but {} overlap an offloaded range", flagged, offloaded_blocks));

  std::size_t pooled = 0;
  for (std::size_t p = 0; p < pools_.size(); ++p) {
    std::size_t bytes = 0;
    pools_[p].for_each([&](const block* b) {
      bytes += b->bytes;
      if (b->state != block_state::free) fail(fmt::format("pool '{}' holds block {:#x} that is not free", pool_traits_[p].name, b->addr));
      if (b->seg->pool != p) fail(fmt::format("pool '{}' holds block {:#x} of pool {}", pool_traits_[p].name, b->addr, b->seg->pool));
    });
    if (bytes != pools_[p].free_bytes()) fail(fmt::format("pool '{}': blocks sum to {} but books say {}", pool_traits_[p].name, bytes, pools_[p].free_bytes()));
    pooled += pools_[p].size();
  }
  if (deferred_ != nullptr && deferred_->state != block_state::free) fail(fmt::format("deferred block {:#x} is not free", deferred_->addr));
  if (pooled != free_blocks) fail(fmt::format("pools hold {} blocks but {} blocks are free", pooled, free_blocks));
  if (live_.size() != static_cast<std::size_t>(allocations[0])) fail(fmt::format("live map has {} entries for {} allocated blocks", live_.size(), allocations[0]));
  if (deferred_ != nullptr && deferred_->birth_interval < live_by_interval.size()) {
    live_by_interval[deferred_->birth_interval] += deferred_->bytes;  // counted until it settles
  }
  if (live_bytes_by_interval_.size() != std::size_t{interval_} + 1) {
    fail(fmt::format("{} intervals so far, but live bytes are kept for {}", std::size_t{interval_} + 1,
                     live_bytes_by_interval_.size()));
  } else if (live_by_interval != live_bytes_by_interval_) {
    for (std::size_t i = 0; i < live_by_interval.size(); ++i) {
      if (live_by_interval[i] != live_bytes_by_interval_[i]) {
        fail(fmt::format("interval {}: its allocated blocks hold {} bytes, the books say {}", i, live_by_interval[i],
                         live_bytes_by_interval_[i]));
      }
    }
  }
  std::size_t pending_events = 0;
  for (const pending_free& p : pending_) {
    if (p.b->state != block_state::pending_free) fail(fmt::format("pending event for block {:#x} that is not pending", p.b->addr));
    ++pending_events;
  }
  (void)pending_events;
  if (pending_blocks > pending_.size()) fail(fmt::format("{} pending blocks but {} pending events", pending_blocks, pending_.size()));

  const auto compare = [&](const char* name, const stat_array& books, const std::array<std::int64_t, 3>& truth) {
    static constexpr const char* types[] = {"all", "small_pool", "large_pool"};
    for (std::size_t i = 0; i < 3; ++i) {
      if (books.by_type[i].current != truth[i]) {
        fail(fmt::format("{}.{}.current is {} but the blocks sum to {}", name, types[i], books.by_type[i].current, truth[i]));
      }
      if (books.by_type[i].peak < books.by_type[i].current) fail(fmt::format("{}.{}: peak below current", name, types[i]));
    }
  };
  compare("allocated_bytes", stats_.allocated_bytes, allocated);
  compare("active_bytes", stats_.active_bytes, active);
  compare("requested_bytes", stats_.requested_bytes, requested);
  compare("reserved_bytes", stats_.reserved_bytes, reserved);
  compare("segment", stats_.segment, segments);
  compare("allocation", stats_.allocation, allocations);
  compare("offloaded_bytes", stats_.offloaded_bytes, offloaded);
  if (options_.limit_bytes == 0 && static_cast<std::size_t>(reserved[0]) > device_.caps().capacity_bytes) {
    fail(fmt::format("reserved {} exceeds the device capacity {}", reserved[0], device_.caps().capacity_bytes));
  }
  return broken;
}

}  // namespace phasealloc::detail
