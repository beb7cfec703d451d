#include "engine_observer.hpp"

#include "event_listener.hpp"

namespace phasealloc::interpose {

void engine_observer::on_event(const trace_record& record) noexcept {
  switch (record.op) {
    case trace_op::segment_alloc:
    case trace_op::segment_map:
    case trace_op::segment_free:
    case trace_op::segment_unmap:
      try {
        std::lock_guard lock(mutex_);
        if (record.op == trace_op::segment_alloc || record.op == trace_op::segment_map) {
          ranges_.insert(record.addr, record.block_bytes);
        } else {
          ranges_.erase(record.addr, record.block_bytes);
        }
      } catch (...) {
        // Out of host memory: record_stream falls back to asking every engine (see c_api_alloc.cpp).
      }
      break;
    case trace_op::offload:
      // The offload's segment_unmap took the range out (the device's memory went back), but its
      // blocks are still phasealloc's, at the same addresses (host-backed): each offloaded block
      // comes back here, so owner lookups and record_stream still find this engine.
      try {
        std::lock_guard lock(mutex_);
        ranges_.insert(record.addr, record.block_bytes);
      } catch (...) {
        // Out of host memory: as above.
      }
      break;
    default: break;
  }
  notify_event_listener(ordinal_, record);
  if (trace_sink* sink = forward()) sink->on_event(record);
}

trace_op_mask engine_observer::wanted_ops() const noexcept {
  if (forward() != nullptr || event_listener_set()) return all_trace_ops;
  return trace_op_bit(trace_op::segment_alloc) | trace_op_bit(trace_op::segment_map) |
         trace_op_bit(trace_op::segment_free) | trace_op_bit(trace_op::segment_unmap) | trace_op_bit(trace_op::offload);
}

bool engine_observer::holds(device_address addr) const {
  std::lock_guard lock(mutex_);
  return ranges_.contains(addr);
}

}  // namespace phasealloc::interpose
