#include "phasealloc/trace/trace_summary.hpp"

#include <algorithm>

#include "phasealloc/trace/flat_id_map.hpp"

namespace phasealloc {
namespace {

template <class T>
T saturating_sub(T a, T b) { return a >= b ? a - b : 0; }

template <class T>
std::uint64_t clamped(T v) { return v > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(v); }

}  // namespace

void trace_summary_builder::add(const trace_event& e, std::uint64_t live_added, std::uint64_t live_removed) noexcept {
  trace_summary& s = summary_;
  const bool seeded = (e.flags & trace_flag::seeded) != 0;
  switch (e.op) {
    case trace_event_op::alloc:
      ++s.allocs;
      if (seeded) {
        ++s.seeded_allocs;
        seeded_live_bytes_ += e.bytes;
      }
      break;
    case trace_event_op::free: ++s.frees; break;
    case trace_event_op::record_stream: ++s.record_streams; break;
    case trace_event_op::phase: ++s.phase_changes; break;
    case trace_event_op::empty_cache: ++s.empty_caches; break;
    case trace_event_op::oom: ++s.ooms; break;
    case trace_event_op::seed_block: break;  // the layout of seeded segments: their bytes count once
    case trace_event_op::offload:
    case trace_event_op::restore: break;  // their device memory shows in the segment_unmap / segment_map they make
    case trace_event_op::segment_alloc:
      if (seeded) {
        ++s.seeded_segments;
        initial_reserved_bytes_ += e.bytes;
      } else {
        ++s.segment_allocs;
      }
      reserved_bytes_ += e.bytes;
      break;
    case trace_event_op::segment_map:
      ++s.segment_maps;
      reserved_bytes_ += e.bytes;
      break;
    case trace_event_op::segment_free:
      ++s.segment_frees;
      reserved_bytes_ = saturating_sub<level>(reserved_bytes_, e.bytes);
      break;
    case trace_event_op::segment_unmap:
      ++s.segment_unmaps;
      reserved_bytes_ = saturating_sub<level>(reserved_bytes_, e.bytes);
      break;
  }
  live_bytes_ = saturating_sub<level>(live_bytes_ + live_added, live_removed);
  ++s.events;
  peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
  peak_reserved_bytes_ = std::max(peak_reserved_bytes_, reserved_bytes_);
  s.duration_ns = e.time_ns;
}

trace_summary trace_summary_builder::finish() const noexcept {
  trace_summary s = summary_;
  s.seeded_live_bytes = clamped(seeded_live_bytes_);
  s.initial_reserved_bytes = clamped(initial_reserved_bytes_);
  s.peak_live_bytes = clamped(peak_live_bytes_);
  s.peak_reserved_bytes = clamped(peak_reserved_bytes_);
  s.final_live_bytes = clamped(live_bytes_);
  s.final_reserved_bytes = clamped(reserved_bytes_);
  return s;
}

trace_summary summarize(const trace& t) {
  trace_summary_builder builder;
  flat_id_map<std::uint64_t> live;  // live allocation id -> its bytes
  for (const trace_event& e : t.events) {
    std::uint64_t added = 0;
    std::uint64_t removed = 0;
    if (e.op == trace_event_op::alloc) {
      if (live.try_emplace(e.alloc_id, e.bytes).second) added = e.bytes;
    } else if (e.op == trace_event_op::free) {
      if (const std::uint64_t* bytes = live.find(e.alloc_id)) {
        removed = *bytes;
        live.erase(e.alloc_id);
      }
    }
    builder.add(e, added, removed);
  }
  return builder.finish();
}

}  // namespace phasealloc
