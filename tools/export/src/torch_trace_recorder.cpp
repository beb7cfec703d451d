#include "phasealloc/export/torch_trace_recorder.hpp"

#include <algorithm>
#include <new>

namespace phasealloc {

torch_trace_recorder::torch_trace_recorder(std::vector<placed_trace_entry>& out, std::size_t capacity_bytes,
                                           const std::uint64_t* clock_ns)
    : out_(out), capacity_bytes_(capacity_bytes), clock_ns_(clock_ns) {}

void torch_trace_recorder::on_event(const trace_record& r) noexcept {
  if (failed_) return;
  try {
    record(r);
  } catch (const std::bad_alloc&) {
    failed_ = true;  // reported by the caller after the replay
  }
}

void torch_trace_recorder::record(const trace_record& r) {
  switch (r.op) {
    case trace_op::alloc:
      requested_[r.addr] = r.requested_bytes;
      push("alloc", r.addr, r.requested_bytes, r.stream);
      break;
    case trace_op::free_requested: {
      const auto it = requested_.find(r.addr);
      push("free_requested", r.addr, it != requested_.end() ? it->second : r.requested_bytes, r.stream);
      break;
    }
    case trace_op::free_completed: {
      const auto it = requested_.find(r.addr);
      const std::size_t size = it != requested_.end() ? it->second : r.block_bytes;
      if (it != requested_.end()) requested_.erase(it);
      push("free_completed", r.addr, size, r.stream);
      break;
    }
    case trace_op::segment_alloc:
      allocated_[r.addr] = r.block_bytes;
      map_range(r.addr, r.block_bytes);
      reserved_ += r.block_bytes;
      push("segment_alloc", r.addr, r.block_bytes, r.stream);
      break;
    case trace_op::segment_map:
      map_range(r.addr, r.block_bytes);
      reserved_ += r.block_bytes;
      push("segment_map", r.addr, r.block_bytes, r.stream);
      break;
    case trace_op::segment_unmap:
      unmap_range(r.addr, r.block_bytes);
      reserved_ -= std::min(reserved_, r.block_bytes);
      push("segment_unmap", r.addr, r.block_bytes, r.stream);
      break;
    case trace_op::segment_free: {
      const auto made = allocated_.find(r.addr);
      const bool whole = made != allocated_.end() && made->second == r.block_bytes &&
                         mapped_within(r.addr, r.block_bytes) == r.block_bytes;
      if (made != allocated_.end()) allocated_.erase(made);
      if (whole) {
        unmap_range(r.addr, r.block_bytes);
        reserved_ -= std::min(reserved_, r.block_bytes);
        push("segment_free", r.addr, r.block_bytes, r.stream);
        break;
      }
      // A reservation with holes (or never mapped as a whole): release what is mapped, run by run.
      const std::uint64_t end = r.addr + r.block_bytes;
      std::vector<std::pair<std::uint64_t, std::size_t>> runs;
      for (auto it = mapped_.lower_bound(r.addr); it != mapped_.end() && it->first < end; ++it) {
        runs.emplace_back(it->first, std::min<std::uint64_t>(it->second, end - it->first));
      }
      for (const auto& [addr, bytes] : runs) {
        unmap_range(addr, bytes);
        reserved_ -= std::min(reserved_, bytes);
        push("segment_unmap", addr, bytes, r.stream);
      }
      break;
    }
    case trace_op::oom: {
      const std::size_t device_free = capacity_bytes_ - std::min(capacity_bytes_, reserved_);
      push("oom", device_free, r.block_bytes, r.stream);
      out_.back().device_free = device_free;
      break;
    }
    case trace_op::phase_begin:
      phase_ = r.name == "unphased" ? std::string() : std::string(r.name);
      break;
    default:  // phase_end, empty_cache, record_stream, offload, restore: PyTorch's trace has no such entries
      break;
  }
}

void torch_trace_recorder::push(std::string_view action, std::uint64_t addr, std::size_t size,
                                std::uint64_t stream) {
  placed_trace_entry e;
  e.action = std::string(action);
  e.addr = addr;
  e.size = size;
  e.stream = stream;
  e.time_us = clock_ns_ != nullptr ? *clock_ns_ / 1000 : out_.size();
  e.phase = phase_;
  out_.push_back(std::move(e));
}

void torch_trace_recorder::map_range(std::uint64_t addr, std::size_t bytes) {
  if (bytes == 0) return;
  std::uint64_t lo = addr;
  std::uint64_t hi = addr + bytes;
  auto it = mapped_.upper_bound(lo);
  if (it != mapped_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second >= lo) it = prev;  // touches or overlaps: merge
  }
  while (it != mapped_.end() && it->first <= hi) {
    lo = std::min(lo, it->first);
    hi = std::max<std::uint64_t>(hi, it->first + it->second);
    it = mapped_.erase(it);
  }
  mapped_.emplace(lo, hi - lo);
}

void torch_trace_recorder::unmap_range(std::uint64_t addr, std::size_t bytes) {
  const std::uint64_t lo = addr;
  const std::uint64_t hi = addr + bytes;
  auto it = mapped_.upper_bound(lo);
  if (it != mapped_.begin()) it = std::prev(it);
  while (it != mapped_.end() && it->first < hi) {
    const std::uint64_t start = it->first;
    const std::uint64_t stop = start + it->second;
    if (stop <= lo) {
      ++it;
      continue;
    }
    it = mapped_.erase(it);
    if (start < lo) mapped_.emplace(start, lo - start);
    if (stop > hi) mapped_.emplace(hi, stop - hi);
  }
}

std::size_t torch_trace_recorder::mapped_within(std::uint64_t addr, std::size_t bytes) const {
  const std::uint64_t lo = addr;
  const std::uint64_t hi = addr + bytes;
  std::size_t total = 0;
  auto it = mapped_.upper_bound(lo);
  if (it != mapped_.begin()) it = std::prev(it);
  for (; it != mapped_.end() && it->first < hi; ++it) {
    const std::uint64_t start = std::max(lo, it->first);
    const std::uint64_t stop = std::min<std::uint64_t>(hi, it->first + it->second);
    if (stop > start) total += stop - start;
  }
  return total;
}

}  // namespace phasealloc
