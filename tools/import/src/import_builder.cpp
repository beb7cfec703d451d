#include "import_builder.hpp"

#include "phasealloc/trace/trace_validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>

namespace phasealloc::detail {

import_builder::import_builder(trace_metadata meta) {
  trace_.meta = std::move(meta);
  streams_.emplace(0, 0U);
}

void import_builder::set_time_ns(std::uint64_t raw_ns) {
  if (!have_origin_) {
    have_origin_ = true;
    origin_ns_ = raw_ns;
  }
  if (raw_ns < origin_ns_ || raw_ns - origin_ns_ < now_ns_) {
    ++clamped_times_;  // earlier than the previous event: keep the previous time
    return;
  }
  now_ns_ = raw_ns - origin_ns_;
}

std::uint32_t import_builder::stream_ordinal(std::uint64_t handle) {
  const auto [it, inserted] = streams_.try_emplace(handle, static_cast<std::uint32_t>(streams_.size()));
  return it->second;
}

void import_builder::push(trace_event_op op, std::uint64_t id, std::uint64_t bytes, std::uint32_t stream,
                          std::uint32_t name) {
  trace_event e;
  e.op = op;
  e.time_ns = now_ns_;
  e.alloc_id = id;
  e.bytes = bytes;
  e.stream = stream;
  e.name = name;
  trace_.events.push_back(e);
}

void import_builder::create(book& b, trace_event_op op, trace_event_op free_op, std::uint64_t addr,
                            std::uint64_t bytes, std::uint64_t stream) {
  const std::uint32_t ordinal = stream_ordinal(stream);
  if (const auto it = b.live.find(addr); it != b.live.end()) {
    // The free of the previous occupant was not recorded.
    const object& old = b.objects[it->second];
    push(free_op, it->second, old.bytes, old.stream);
    b.live.erase(it);
    ++implicit_frees_;
  }
  const std::uint64_t id = b.objects.size();
  b.objects.push_back(object{addr, bytes, ordinal, false});
  b.live.emplace(addr, id);
  push(op, id, bytes, ordinal);
}

void import_builder::destroy(book& b, trace_event_op op, std::uint64_t addr, std::uint64_t bytes,
                             std::uint64_t stream) {
  const std::uint32_t ordinal = stream_ordinal(stream);
  std::uint64_t id = 0;
  if (const auto it = b.live.find(addr); it != b.live.end()) {
    id = it->second;
    b.live.erase(it);
  } else {
    // Allocated before recording began: seed it.
    id = b.objects.size();
    b.objects.push_back(object{addr, bytes, ordinal, true});
  }
  b.objects[id].referenced = true;
  // The free carries the allocation's own size, so the trace validates even when a format
  // reports a different size on the free (profilers report the block size).
  push(op, id, b.objects[id].bytes, ordinal);
}

void import_builder::seed_if_dead(book& b, std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream) {
  if (b.live.contains(addr)) {
    return;
  }
  const std::uint64_t id = b.objects.size();
  b.objects.push_back(object{addr, bytes, stream_ordinal(stream), true});
  b.live.emplace(addr, id);
}

void import_builder::seed_anonymous(book& b, std::uint64_t bytes, std::uint64_t stream) {
  b.objects.push_back(object{UINT64_MAX, bytes, stream_ordinal(stream), true, false});
}

void import_builder::alloc(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream) {
  create(allocs_, trace_event_op::alloc, trace_event_op::free, addr, bytes, stream);
}
void import_builder::free(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream) {
  destroy(allocs_, trace_event_op::free, addr, bytes, stream);
}
void import_builder::segment_alloc(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream) {
  create(segments_, trace_event_op::segment_alloc, trace_event_op::segment_free, addr, bytes, stream);
}
void import_builder::segment_free(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream) {
  destroy(segments_, trace_event_op::segment_free, addr, bytes, stream);
}
void import_builder::segment_map(std::uint64_t bytes, std::uint64_t stream) {
  push(trace_event_op::segment_map, 0, bytes, stream_ordinal(stream));
}
void import_builder::segment_unmap(std::uint64_t bytes, std::uint64_t stream) {
  push(trace_event_op::segment_unmap, 0, bytes, stream_ordinal(stream));
}
void import_builder::oom(std::uint64_t bytes, std::uint64_t stream) {
  push(trace_event_op::oom, 0, bytes, stream_ordinal(stream));
}
void import_builder::empty_cache() { push(trace_event_op::empty_cache, 0, 0, 0); }
void import_builder::phase(std::string_view name) { push(trace_event_op::phase, 0, 0, 0, intern_string(trace_, name)); }

void import_builder::live_at_end_alloc(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream) {
  seed_if_dead(allocs_, addr, bytes, stream);
}
void import_builder::live_at_end_segment(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream) {
  seed_if_dead(segments_, addr, bytes, stream);
}

void import_builder::seed_alloc(std::uint64_t bytes, std::uint64_t stream) { seed_anonymous(allocs_, bytes, stream); }
void import_builder::seed_segment(std::uint64_t bytes, std::uint64_t stream) {
  seed_anonymous(segments_, bytes, stream);
}

std::vector<std::uint64_t> import_builder::final_ids(const book& b, std::vector<std::uint64_t>& seeded_order) {
  seeded_order.clear();
  for (std::uint64_t id = 0; id < b.objects.size(); ++id) {
    if (b.objects[id].seeded) {
      seeded_order.push_back(id);
    }
  }
  std::stable_sort(seeded_order.begin(), seeded_order.end(),
                   [&](std::uint64_t x, std::uint64_t y) {
                     const object& a = b.objects[x];
                     const object& c = b.objects[y];
                     return a.has_address != c.has_address ? a.has_address : a.addr < c.addr;
                   });
  std::vector<std::uint64_t> ids(b.objects.size());
  std::uint64_t next = 0;
  for (const std::uint64_t id : seeded_order) {
    ids[id] = next++;
  }
  for (std::uint64_t id = 0; id < b.objects.size(); ++id) {
    if (!b.objects[id].seeded) {
      ids[id] = next++;
    }
  }
  return ids;
}

void import_builder::set_layout(std::vector<layout_segment> layout) { layout_ = std::move(layout); }

bool import_builder::emit_layout(std::vector<trace_event>& events, const std::vector<std::uint64_t>& alloc_ids,
                                 const std::vector<std::uint64_t>& segment_ids, std::vector<bool>& segment_done) {
  std::unordered_map<std::uint64_t, std::uint64_t> seeded_alloc_at;  // addr -> final id
  for (std::uint64_t id = 0; id < allocs_.objects.size(); ++id) {
    const object& o = allocs_.objects[id];
    if (o.seeded && o.has_address) seeded_alloc_at.emplace(o.addr, alloc_ids[id]);
  }
  std::unordered_map<std::uint64_t, std::uint64_t> seeded_segment_at;  // addr -> provisional id
  for (std::uint64_t id = 0; id < segments_.objects.size(); ++id) {
    const object& o = segments_.objects[id];
    if (o.seeded && o.has_address) seeded_segment_at.emplace(o.addr, id);
  }
  for (const layout_segment& s : *layout_) {
    for (const layout_block& b : s.blocks) {
      if (b.allocated && !seeded_alloc_at.contains(b.addr)) {
        layout_note_ = fmt::format("not used: the block at {:#x} is live at the start of the layout but not a "
                                   "seeded allocation",
                                   b.addr);
        return false;
      }
    }
  }
  std::uint64_t next_segment_id = segments_.objects.size();
  for (const layout_segment& s : *layout_) {
    // The segment's id: that of the seeded segment at one of its addresses, so later events naming
    // it still match; the other seeded runs of an expandable reservation are folded into it.
    std::optional<std::uint64_t> id;
    std::vector<std::uint64_t> addrs = s.run_addrs;
    addrs.push_back(s.addr);
    for (const std::uint64_t a : addrs) {
      const auto it = seeded_segment_at.find(a);
      if (it == seeded_segment_at.end() || segment_done[it->second]) continue;
      segment_done[it->second] = true;
      if (!id) id = segment_ids[it->second];
    }
    trace_event seg;
    seg.op = trace_event_op::segment_alloc;
    seg.flags = trace_flag::seeded | (s.small ? trace_flag::small_pool : 0) | (s.expandable ? trace_flag::expandable : 0);
    seg.alloc_id = id ? *id : next_segment_id++;
    seg.bytes = s.mapped_bytes;
    seg.stream = stream_ordinal(s.stream);
    events.push_back(seg);
    for (const layout_block& b : s.blocks) {
      trace_event e;
      e.op = trace_event_op::seed_block;
      e.flags = trace_flag::seeded | (b.allocated ? trace_flag::allocated : 0) | (b.unmapped ? trace_flag::unmapped : 0);
      e.alloc_id = b.allocated ? seeded_alloc_at[b.addr] : 0;
      e.bytes = b.bytes;
      e.stream = seg.stream;
      events.push_back(e);
    }
  }
  return true;
}

trace import_builder::finish() {
  std::vector<std::uint64_t> seeded_allocs;
  std::vector<std::uint64_t> seeded_segments;
  const std::vector<std::uint64_t> alloc_ids = final_ids(allocs_, seeded_allocs);
  const std::vector<std::uint64_t> segment_ids = final_ids(segments_, seeded_segments);

  std::vector<trace_event> events;
  events.reserve(seeded_allocs.size() + seeded_segments.size() + trace_.events.size());
  auto seed = [&](trace_event_op op, const object& o, std::uint64_t id) {
    trace_event e;
    e.op = op;
    e.flags = trace_flag::seeded;
    e.alloc_id = id;
    e.bytes = o.bytes;
    e.stream = o.stream;
    events.push_back(e);
  };
  if (layout_) {
    // Allocations first: the layout's blocks name them.
    std::vector<trace_event> layout_events;
    std::vector<bool> segment_done(segments_.objects.size(), false);
    if (emit_layout(layout_events, alloc_ids, segment_ids, segment_done)) {
      for (const std::uint64_t id : seeded_allocs) {
        seed(trace_event_op::alloc, allocs_.objects[id], alloc_ids[id]);
      }
      // Seeded segments outside the layout that a later event names (none when the layout is whole).
      for (const std::uint64_t id : seeded_segments) {
        if (!segment_done[id] && segments_.objects[id].referenced) {
          seed(trace_event_op::segment_alloc, segments_.objects[id], segment_ids[id]);
        }
      }
      events.insert(events.end(), layout_events.begin(), layout_events.end());
      trace_.version = trace_format_version_layout;
      layout_note_ = fmt::format("used: {} segments", layout_->size());
      seeded_segments.clear();
      seeded_allocs.clear();
    }
  }
  // Segments first: the blocks live inside them.
  for (const std::uint64_t id : seeded_segments) {
    seed(trace_event_op::segment_alloc, segments_.objects[id], segment_ids[id]);
  }
  for (const std::uint64_t id : seeded_allocs) {
    seed(trace_event_op::alloc, allocs_.objects[id], alloc_ids[id]);
  }
  for (trace_event e : trace_.events) {
    switch (e.op) {
      case trace_event_op::alloc:
      case trace_event_op::free:
      case trace_event_op::record_stream: e.alloc_id = alloc_ids[e.alloc_id]; break;
      case trace_event_op::segment_alloc:
      case trace_event_op::segment_free: e.alloc_id = segment_ids[e.alloc_id]; break;
      default: break;
    }
    events.push_back(e);
  }
  trace_.events = std::move(events);
  trace_.meta.stream_count = static_cast<std::uint32_t>(streams_.size());
  std::size_t seeded_alloc_count = 0;
  std::size_t seeded_segment_count = 0;
  for (const trace_event& e : trace_.events) {
    if ((e.flags & trace_flag::seeded) == 0) break;
    seeded_alloc_count += e.op == trace_event_op::alloc ? 1 : 0;
    seeded_segment_count += e.op == trace_event_op::segment_alloc ? 1 : 0;
  }
  set_property(trace_.meta, "import.seeded_allocs", std::to_string(seeded_alloc_count));
  set_property(trace_.meta, "import.seeded_segments", std::to_string(seeded_segment_count));
  if (layout_ || !layout_note_.empty()) set_property(trace_.meta, "import.layout", layout_note_);
  set_property(trace_.meta, "import.implicit_frees", std::to_string(implicit_frees_));
  set_property(trace_.meta, "import.clamped_times", std::to_string(clamped_times_));
  return std::move(trace_);
}

result<trace, trace_error> valid_import(trace t, std::string_view source_name) {
  auto valid = validate(t);
  if (!valid) {
    return trace_error{std::string(source_name), 0, 0, "input that makes a valid trace",
                       "what imports as " + valid.error().message()};
  }
  return t;
}

}  // namespace phasealloc::detail
