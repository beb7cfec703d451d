#include "trace_builder.hpp"

#include <algorithm>

#include "phasealloc/check.hpp"

namespace phasealloc::detail::synth {

trace_builder::trace_builder(std::size_t max_events) : slots_(1), max_events_(max_events) {}

void trace_builder::push(trace_event e) {
  if (trace_.events.size() >= max_events_) {
    overflowed_ = true;
    return;
  }
  e.time_ns = now_ns_;
  trace_.events.push_back(e);
}

alloc_id trace_builder::alloc(std::size_t bytes, alloc_tag tag, std::uint32_t stream) {
  if (bytes == 0) return 0;
  const alloc_id id = slots_.size();
  slots_.push_back({bytes, 1, stream});
  live_bytes_ += bytes;
  peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
  max_stream_ = std::max(max_stream_, stream);
  trace_event e;
  e.op = trace_event_op::alloc;
  e.stream = stream;
  e.alloc_id = id;
  e.bytes = bytes;
  e.tag = static_cast<std::uint32_t>(tag);
  push(e);
  return id;
}

alloc_id trace_builder::alloc_once(std::string_view key, std::size_t bytes, alloc_tag tag) {
  for (const auto& [k, id] : once_) {
    if (k == key) return id;
  }
  const alloc_id id = alloc(bytes, tag);
  once_.emplace_back(std::string(key), id);
  return id;
}

void trace_builder::retain(alloc_id id) {
  if (id == 0) return;
  PHASEALLOC_CHECK(id < slots_.size() && slots_[id].references > 0, "synth: retain of a dead allocation");
  ++slots_[id].references;
}

void trace_builder::release(alloc_id id) {
  if (id == 0) return;
  PHASEALLOC_CHECK(id < slots_.size() && slots_[id].references > 0, "synth: release of a dead allocation");
  slot& s = slots_[id];
  if (--s.references > 0) return;
  live_bytes_ -= s.bytes;
  trace_event e;
  e.op = trace_event_op::free;
  e.stream = s.stream;
  e.alloc_id = id;
  e.bytes = s.bytes;
  push(e);
}

void trace_builder::record_stream(alloc_id id, std::uint32_t stream) {
  if (id == 0) return;
  max_stream_ = std::max(max_stream_, stream);
  trace_event e;
  e.op = trace_event_op::record_stream;
  e.stream = stream;
  e.alloc_id = id;
  push(e);
}

std::uint32_t trace_builder::references(alloc_id id) const {
  return id < slots_.size() ? slots_[id].references : 0;
}

std::size_t trace_builder::bytes_of(alloc_id id) const { return id < slots_.size() ? slots_[id].bytes : 0; }

void trace_builder::phase(std::string_view name) {
  trace_event e;
  e.op = trace_event_op::phase;
  e.name = intern_string(trace_, name);
  push(e);
}

void trace_builder::empty_cache() {
  trace_event e;
  e.op = trace_event_op::empty_cache;
  push(e);
}

trace trace_builder::take() {
  trace_.meta.stream_count = max_stream_ + 1;
  trace out = std::move(trace_);
  trace_ = trace{};
  return out;
}

}  // namespace phasealloc::detail::synth
