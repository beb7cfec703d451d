#include "phasealloc/trace/trace_summary.hpp"

#include <algorithm>

#include "phasealloc/trace/flat_id_map.hpp"

namespace phasealloc {
namespace {

std::uint64_t saturating_sub(std::uint64_t a, std::uint64_t b) { return a >= b ? a - b : 0; }

}  // namespace

trace_summary summarize(const trace& t) {
  trace_summary s;
  s.events = t.events.size();
  flat_id_map<std::uint64_t> live;  // live allocation id -> its bytes
  std::uint64_t live_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  for (const trace_event& e : t.events) {
    const bool seeded = (e.flags & trace_flag::seeded) != 0;
    switch (e.op) {
      case trace_event_op::alloc:
        ++s.allocs;
        if (seeded) {
          ++s.seeded_allocs;
          s.seeded_live_bytes += e.bytes;
        }
        if (live.try_emplace(e.alloc_id, e.bytes).second) {
          live_bytes += e.bytes;
        }
        break;
      case trace_event_op::free: {
        ++s.frees;
        if (const std::uint64_t* bytes = live.find(e.alloc_id)) {
          live_bytes -= *bytes;
          live.erase(e.alloc_id);
        }
        break;
      }
      case trace_event_op::record_stream: ++s.record_streams; break;
      case trace_event_op::phase: ++s.phase_changes; break;
      case trace_event_op::empty_cache: ++s.empty_caches; break;
      case trace_event_op::oom: ++s.ooms; break;
      case trace_event_op::seed_block: break;  // the layout of seeded segments: their bytes count once
      case trace_event_op::segment_alloc:
        if (seeded) {
          ++s.seeded_segments;
          s.initial_reserved_bytes += e.bytes;
        } else {
          ++s.segment_allocs;
        }
        reserved_bytes += e.bytes;
        break;
      case trace_event_op::segment_map:
        ++s.segment_maps;
        reserved_bytes += e.bytes;
        break;
      case trace_event_op::segment_free:
        ++s.segment_frees;
        reserved_bytes = saturating_sub(reserved_bytes, e.bytes);
        break;
      case trace_event_op::segment_unmap:
        ++s.segment_unmaps;
        reserved_bytes = saturating_sub(reserved_bytes, e.bytes);
        break;
    }
    s.peak_live_bytes = std::max(s.peak_live_bytes, live_bytes);
    s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, reserved_bytes);
    s.duration_ns = e.time_ns;
  }
  s.final_live_bytes = live_bytes;
  s.final_reserved_bytes = reserved_bytes;
  return s;
}

}  // namespace phasealloc
