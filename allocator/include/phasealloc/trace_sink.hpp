// What the engine tells a trace recorder. Addresses appear here; the recorder turns them into
// allocation ids (the trace format is address-free), and stamps time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "phasealloc/types.hpp"

namespace phasealloc {

enum class trace_op {
  alloc,           ///< addr, requested_bytes, block_bytes, stream, tag
  free_requested,  ///< addr, requested_bytes, block_bytes, stream (the caller's free)
  free_completed,  ///< addr, block_bytes (the block is back in its pool; later when events were pending)
  segment_alloc,   ///< addr, block_bytes = segment size (a new segment: reserve, and map when needed)
  segment_free,    ///< addr, block_bytes (a segment released)
  segment_map,     ///< addr, block_bytes (pages mapped into an existing reservation)
  segment_unmap,   ///< addr, block_bytes (pages unmapped, reservation kept)
  phase_begin,     ///< phase, name
  phase_end,       ///< phase, name
  empty_cache,     ///< a caller asked for every cached byte back
  oom,             ///< requested_bytes, block_bytes = rounded, stream
  record_stream,   ///< addr, stream (another stream used the block)
  /// addr: a block named in an offload (engine::offload) or a restore (engine::restore);
  /// requested_bytes: the call's ordinal (the blocks of one call share it), block_bytes.
  offload,
  restore,
};

struct trace_record {
  trace_op op = trace_op::alloc;
  device_address addr = 0;
  std::size_t requested_bytes = 0;
  std::size_t block_bytes = 0;
  stream_id stream = 0;
  phase_id phase = unphased;
  std::uint32_t tag = 0;
  std::string_view name;  ///< Phase name for phase events; valid only during the call.
  /// The engine's reserved bytes (all pools) once this event has happened. After seed(), every
  /// change of them comes with an event (segment_alloc, segment_map, segment_unmap, segment_free),
  /// so a sink follows them exactly from these levels. Byte counts would not do: segment_free's
  /// block_bytes is the segment's size, more than it gives back when pages of it were unmapped before.
  std::size_t reserved_bytes = 0;
};

/// A set of trace_ops, one bit each (bit i: the op whose value is i).
using trace_op_mask = std::uint32_t;
constexpr trace_op_mask trace_op_bit(trace_op op) noexcept { return trace_op_mask{1} << static_cast<unsigned>(op); }
inline constexpr trace_op_mask all_trace_ops = ~trace_op_mask{0};

class trace_sink {
 public:
  virtual ~trace_sink() = default;
  /// Called under the engine's lock: must be quick and must not call back into the engine.
  virtual void on_event(const trace_record& record) noexcept = 0;
  /// The ops this sink takes; the engine sends no other (and builds no record for them). Read when
  /// the sink is set (engine::set_trace_sink): a sink whose interest changes calls it again.
  /// Default: every op.
  virtual trace_op_mask wanted_ops() const noexcept { return all_trace_ops; }
};

}  // namespace phasealloc
