// Records what an engine does as an address-free trace.
//
// Design note
// Rationale: the engine reports addresses and opaque stream handles (trace_sink.hpp); a trace must
//   hold neither, or a replay would depend on the recording allocator's address reuse (rmm's
//   mistake). The recorder is the one place that translates.
// Approach: live addresses map to allocation ids (unordered_map; ids count up from 0), segment
//   addresses to segment ids, stream handles to ordinals in order of first sight (handle 0 is
//   ordinal 0), phase names to indices of the string table. Time is the injected clock minus its
//   value at construction, clamped so it never decreases. on_event appends one event: no allocation
//   beyond vector and map growth, one uncontended mutex (so take()/flush_to() may run on another
//   thread). free_completed is not recorded: the caller's free (free_requested) is the event a
//   replay follows.
//   Phases: the engine reports every transition (begin, end, replace) as phase_end(from) then
//   phase_begin(to), where `to` is the phase that becomes current: exactly what a trace phase event
//   says. So phase_begin becomes a phase event and phase_end is not recorded.
// Limitations: a free, record_stream or segment_free naming an address the recorder never saw
//   (recording attached after the allocation) is dropped and counted in unmatched_events().
//   One recorder per engine (per device): the trace format has no device column.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_format.hpp"
#include "phasealloc/trace_sink.hpp"

namespace phasealloc {

struct trace_recorder_options {
  /// Monotonic nanoseconds; steady_clock when empty. Injected by tests.
  std::function<std::uint64_t()> clock_ns;
  std::string source = "phasealloc recorder";
  std::string allocator_settings;           ///< The engine's settings string, copied into the metadata.
  std::uint64_t device_capacity_bytes = 0;  ///< 0 = unknown.
  std::size_t reserve_events = 0;           ///< Events to reserve up front.
};

class trace_recorder final : public trace_sink {
 public:
  explicit trace_recorder(trace_recorder_options options = {});

  void on_event(const trace_record& record) noexcept override;

  /// Returns everything recorded so far and starts over (ids, streams, clock origin and phases reset).
  trace take();
  /// Writes everything recorded so far to `path` (recording goes on).
  result<std::monostate, trace_error> flush_to(const std::filesystem::path& path,
                                               trace_file_format format = trace_file_format::binary) const;

  std::size_t event_count() const;
  /// Frees, record_streams and segment frees of addresses never seen, plus events lost to allocation failure.
  std::uint64_t unmatched_events() const;

 private:
  struct live_entry {
    std::uint64_t id = 0;
    std::uint64_t bytes = 0;
  };

  void reset_locked();
  std::uint64_t now_ns_locked();
  std::uint32_t stream_ordinal_locked(stream_id stream);
  std::uint32_t phase_name_locked(std::string_view name);
  void record_locked(const trace_record& record);
  void push_locked(trace_event_op op, std::uint64_t id, std::uint64_t bytes, std::uint32_t stream,
                   std::uint32_t tag = 0, std::uint32_t name = 0);
  trace snapshot_locked() const;

  trace_recorder_options options_;
  mutable std::mutex mutex_;
  trace trace_;
  std::uint64_t origin_ns_ = 0;
  std::uint64_t last_ns_ = 0;
  std::uint64_t next_alloc_id_ = 0;
  std::uint64_t next_segment_id_ = 0;
  std::uint64_t unmatched_ = 0;
  std::unordered_map<device_address, live_entry> live_allocs_;
  std::unordered_map<device_address, live_entry> live_segments_;
  std::unordered_map<stream_id, std::uint32_t> streams_;
  std::unordered_map<std::string, std::uint32_t> names_;
};

}  // namespace phasealloc
