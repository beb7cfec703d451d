#include "start_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace phasealloc::detail {
namespace {

constexpr std::uint64_t min_block_bytes = 512;             // kMinBlockSize
constexpr std::uint64_t small_size_bytes = 1 << 20;        // kSmallSize: largest unsplit remainder
constexpr std::uint64_t small_segment_bytes = 2 << 20;     // kSmallBuffer

std::uint64_t round_block(std::uint64_t requested) {
  return requested < min_block_bytes ? min_block_bytes
                                     : (requested + min_block_bytes - 1) / min_block_bytes * min_block_bytes;
}

}  // namespace

void start_layout::end_segment(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream, bool small,
                               bool expandable) {
  segments_[addr] = run{bytes, stream, small, expandable};
}

void start_layout::end_block(std::uint64_t addr, std::uint64_t bytes, std::uint64_t requested_bytes) {
  blocks_[addr] = live_block{bytes, requested_bytes, {}};
}

void start_layout::history(action a, std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream,
                           std::string where) {
  history_.push_back(entry{a, addr, bytes, stream, std::move(where)});
}

// Before a segment_map the range was unmapped: cut it out of the mapped runs.
void start_layout::map_range(std::uint64_t addr, std::uint64_t bytes) {
  const std::uint64_t end = addr + bytes;
  auto it = segments_.upper_bound(addr);
  if (it != segments_.begin()) --it;
  while (it != segments_.end() && it->first < end) {
    const std::uint64_t start = it->first;
    const run r = it->second;
    const std::uint64_t stop = start + r.bytes;
    if (!r.expandable || stop <= addr) {
      ++it;
      continue;
    }
    it = segments_.erase(it);
    if (start < addr) segments_[start] = run{addr - start, r.stream, r.small, true};
    if (stop > end) it = segments_.insert_or_assign(end, run{stop - end, r.stream, r.small, true}).first;
  }
}

// Before a segment_unmap the range was mapped: add it as a run, joined with runs it touches.
void start_layout::unmap_range(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream) {
  bool small = bytes <= small_segment_bytes;
  std::uint64_t start = addr;
  std::uint64_t stop = addr + bytes;
  auto after = segments_.lower_bound(addr);
  if (after != segments_.end() && after->second.expandable && after->first == stop) {
    small = after->second.small;
    stop += after->second.bytes;
    after = segments_.erase(after);
  }
  if (after != segments_.begin()) {
    auto before = std::prev(after);
    if (before->second.expandable && before->first + before->second.bytes == start) {
      small = before->second.small;
      start = before->first;
      segments_.erase(before);
    }
  }
  segments_[start] = run{stop - start, stream, small, true};
}

result<std::vector<layout_segment>, std::string> start_layout::build() {
  // Undo the history, last entry first.
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    switch (it->a) {
      case action::alloc: blocks_.erase(it->addr); break;
      case action::free_requested: blocks_[it->addr] = live_block{0, it->bytes, it->where}; break;
      case action::segment_alloc: segments_.erase(it->addr); break;
      case action::segment_free:
        segments_[it->addr] = run{it->bytes, it->stream, it->bytes <= small_segment_bytes, false};
        break;
      case action::segment_map: map_range(it->addr, it->bytes); break;
      case action::segment_unmap: unmap_range(it->addr, it->bytes, it->stream); break;
    }
  }

  std::vector<layout_segment> out;
  for (auto seg = segments_.begin(); seg != segments_.end(); ++seg) {
    const std::uint64_t start = seg->first;
    const std::uint64_t stop = start + seg->second.bytes;
    const run& r = seg->second;
    // Expandable runs of one stream and pool next to each other in address order: one reservation.
    const bool joins = r.expandable && !out.empty() && out.back().expandable && out.back().stream == r.stream &&
                       out.back().small == r.small;
    if (!joins) {
      layout_segment s;
      s.addr = start;
      s.stream = r.stream;
      s.small = r.small;
      s.expandable = r.expandable;
      out.push_back(std::move(s));
    }
    layout_segment& s = out.back();
    if (joins) {
      const layout_block& last = s.blocks.back();
      const std::uint64_t end_of_last = last.addr + last.bytes;
      if (start > end_of_last) s.blocks.push_back(layout_block{end_of_last, start - end_of_last, false, true});
    }
    if (r.expandable) s.run_addrs.push_back(start);
    s.mapped_bytes += r.bytes;
    std::uint64_t cursor = start;
    for (auto b = blocks_.lower_bound(start); b != blocks_.end() && b->first < stop; ++b) {
      const std::uint64_t addr = b->first;
      live_block& lb = b->second;
      const auto next = std::next(b);
      const std::uint64_t room_end = next != blocks_.end() && next->first < stop ? next->first : stop;
      if (lb.bytes == 0) {  // freed in the history: its block size is inferred
        lb.bytes = round_block(lb.requested);
        if (lb.bytes <= room_end - addr && !r.small && !r.expandable && room_end - addr - lb.bytes <= small_size_bytes) {
          lb.bytes = room_end - addr;
        }
      }
      if (addr < cursor || addr + lb.bytes > stop) {
        return fmt::format("{}the block at {:#x} ({} bytes) {} its segment [{:#x}, +{})",
                           lb.where.empty() ? "" : lb.where + ": ", addr, lb.bytes,
                           addr < cursor ? "overlaps the block before it in" : "does not fit in", start, r.bytes);
      }
      if (addr > cursor) s.blocks.push_back(layout_block{cursor, addr - cursor, false, false});
      s.blocks.push_back(layout_block{addr, lb.bytes, true, false});
      cursor = addr + lb.bytes;
      lb.where = "placed";
    }
    if (cursor < stop) s.blocks.push_back(layout_block{cursor, stop - cursor, false, false});
  }
  for (const auto& [addr, b] : blocks_) {
    if (b.where != "placed") {
      return fmt::format("{}the block at {:#x} lies in no segment live when the history began",
                         b.where.empty() ? "" : b.where + ": ", addr);
    }
  }
  return out;
}

}  // namespace phasealloc::detail
