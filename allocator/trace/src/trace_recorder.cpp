#include "phasealloc/trace/trace_recorder.hpp"

#include <algorithm>
#include <chrono>

namespace phasealloc {
namespace {

std::uint64_t steady_now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

trace_recorder::trace_recorder(trace_recorder_options options) : options_(std::move(options)) {
  if (!options_.clock_ns) {
    options_.clock_ns = steady_now_ns;
  }
  std::lock_guard lock(mutex_);
  reset_locked();
}

void trace_recorder::reset_locked() {
  trace_ = trace{};
  trace_.meta.source = options_.source;
  trace_.meta.allocator_settings = options_.allocator_settings;
  trace_.meta.device_capacity_bytes = options_.device_capacity_bytes;
  trace_.events.reserve(options_.reserve_events);
  origin_ns_ = options_.clock_ns();
  last_ns_ = 0;
  next_alloc_id_ = 0;
  next_segment_id_ = 0;
  unmatched_ = 0;
  live_allocs_.clear();
  live_segments_.clear();
  streams_.clear();
  streams_.emplace(stream_id{0}, 0U);
  names_.clear();
}

std::uint64_t trace_recorder::now_ns_locked() {
  const std::uint64_t now = options_.clock_ns();
  const std::uint64_t since = now >= origin_ns_ ? now - origin_ns_ : 0;
  last_ns_ = std::max(last_ns_, since);
  return last_ns_;
}

std::uint32_t trace_recorder::stream_ordinal_locked(stream_id stream) {
  const auto [it, inserted] = streams_.try_emplace(stream, static_cast<std::uint32_t>(streams_.size()));
  return it->second;
}

std::uint32_t trace_recorder::phase_name_locked(std::string_view name) {
  const auto [it, inserted] = names_.try_emplace(std::string(name), 0U);
  if (inserted) {
    trace_.strings.emplace_back(name);
    it->second = static_cast<std::uint32_t>(trace_.strings.size() - 1);
  }
  return it->second;
}

void trace_recorder::push_locked(trace_event_op op, std::uint64_t id, std::uint64_t bytes, std::uint32_t stream,
                                 std::uint32_t tag, std::uint32_t name) {
  trace_event e;
  e.op = op;
  e.time_ns = now_ns_locked();
  e.alloc_id = id;
  e.bytes = bytes;
  e.stream = stream;
  e.tag = tag;
  e.name = name;
  trace_.events.push_back(e);
}

void trace_recorder::record_locked(const trace_record& r) {
  switch (r.op) {
    case trace_op::alloc: {
      const std::uint64_t id = next_alloc_id_++;
      live_allocs_[r.addr] = live_entry{id, r.requested_bytes};
      push_locked(trace_event_op::alloc, id, r.requested_bytes, stream_ordinal_locked(r.stream), r.tag);
      return;
    }
    case trace_op::free_requested: {
      const auto it = live_allocs_.find(r.addr);
      if (it == live_allocs_.end()) {
        ++unmatched_;
        return;
      }
      const live_entry entry = it->second;
      live_allocs_.erase(it);
      push_locked(trace_event_op::free, entry.id, entry.bytes, stream_ordinal_locked(r.stream));
      return;
    }
    case trace_op::free_completed: return;
    case trace_op::record_stream: {
      const auto it = live_allocs_.find(r.addr);
      if (it == live_allocs_.end()) {
        ++unmatched_;
        return;
      }
      push_locked(trace_event_op::record_stream, it->second.id, 0, stream_ordinal_locked(r.stream));
      return;
    }
    case trace_op::segment_alloc: {
      const std::uint64_t id = next_segment_id_++;
      live_segments_[r.addr] = live_entry{id, r.block_bytes};
      push_locked(trace_event_op::segment_alloc, id, r.block_bytes, stream_ordinal_locked(r.stream));
      return;
    }
    case trace_op::segment_free: {
      const auto it = live_segments_.find(r.addr);
      if (it == live_segments_.end()) {
        ++unmatched_;
        return;
      }
      const live_entry entry = it->second;
      live_segments_.erase(it);
      push_locked(trace_event_op::segment_free, entry.id, entry.bytes, stream_ordinal_locked(r.stream));
      return;
    }
    case trace_op::segment_map:
    case trace_op::segment_unmap: {
      // The segment whose reservation contains the address is not known here; id 0 (informational).
      const auto op = r.op == trace_op::segment_map ? trace_event_op::segment_map : trace_event_op::segment_unmap;
      push_locked(op, 0, r.block_bytes, stream_ordinal_locked(r.stream));
      return;
    }
    case trace_op::phase_begin:
      push_locked(trace_event_op::phase, 0, 0, 0, 0, phase_name_locked(r.name));
      return;
    case trace_op::phase_end: return;  // always followed by the phase_begin of the phase that becomes current
    case trace_op::empty_cache: push_locked(trace_event_op::empty_cache, 0, 0, 0); return;
    case trace_op::oom:
      push_locked(trace_event_op::oom, 0, r.requested_bytes, stream_ordinal_locked(r.stream));
      return;
    case trace_op::offload:
    case trace_op::restore: {
      const auto it = live_allocs_.find(r.addr);
      if (it == live_allocs_.end()) {
        ++unmatched_;
        return;
      }
      trace_.version = std::max(trace_.version, trace_format_version_offload);
      push_locked(r.op == trace_op::offload ? trace_event_op::offload : trace_event_op::restore, it->second.id,
                  r.requested_bytes, 0);
      return;
    }
  }
}

void trace_recorder::on_event(const trace_record& record) noexcept {
  std::lock_guard lock(mutex_);
  try {
    record_locked(record);
  } catch (...) {  // std::bad_alloc from vector or map growth: lose the event, keep the process
    ++unmatched_;
  }
}

trace trace_recorder::snapshot_locked() const {
  trace copy = trace_;
  copy.meta.stream_count = static_cast<std::uint32_t>(streams_.size());
  return copy;
}

trace trace_recorder::take() {
  std::lock_guard lock(mutex_);
  trace_.meta.stream_count = static_cast<std::uint32_t>(streams_.size());
  trace out = std::move(trace_);
  reset_locked();
  return out;
}

result<std::monostate, trace_error> trace_recorder::flush_to(const std::filesystem::path& path,
                                                             trace_file_format format) const {
  trace copy;
  {
    std::lock_guard lock(mutex_);
    copy = snapshot_locked();
  }
  return save_trace(path, copy, format);
}

std::size_t trace_recorder::event_count() const {
  std::lock_guard lock(mutex_);
  return trace_.events.size();
}

std::uint64_t trace_recorder::unmatched_events() const {
  std::lock_guard lock(mutex_);
  return unmatched_;
}

}  // namespace phasealloc
