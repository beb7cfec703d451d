// The engine's events, with the addresses a policy chose, as PyTorch's device trace entries
// (torch.cuda.memory._snapshot()["device_traces"]), recorded during a replay.
//
// Design note
// Rationale: memory_viz draws a history by address and sums reserved bytes from the segment
//   events, so every entry must carry the address the replay used and sizes that add up: the
//   reserved bytes the entries imply must be the engine's at every step.
// Approach: a trace_sink. Block entries carry the requested size, as PyTorch's do (alloc,
//   free_requested and free_completed of one block all carry the same size, remembered by
//   address). Segment entries carry the bytes that changed. The recorder keeps the mapped
//   ranges: an engine segment_free of a segment its segment_alloc made and that is still wholly
//   mapped (a cudaMalloc'd segment) stays a segment_free; one of a reservation that is partly or not mapped (an expandable
//   segment, or one whose free pages were given back) becomes a segment_unmap per mapped run,
//   as PyTorch reports releasing an expandable segment, and nothing when none is mapped (the
//   reservation alone holds no memory). An oom carries the rounded size and the device's free
//   bytes (capacity - reserved), with addr = device_free as PyTorch writes it. Time is the
//   replayed trace event's (replay_options::clock_ns), else the entry's position. The current
//   phase rides along as user_metadata.
// Limitations: record_stream, empty_cache and phase events have no entry of their own (PyTorch
//   has none either); no stack frames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "phasealloc/export/placed_snapshot_exporter.hpp"
#include "phasealloc/trace_sink.hpp"

namespace phasealloc {

class torch_trace_recorder final : public trace_sink {
 public:
  /// Appends to `out`. `clock_ns`, when given, holds the current trace time (ns).
  torch_trace_recorder(std::vector<placed_trace_entry>& out, std::size_t capacity_bytes,
                       const std::uint64_t* clock_ns = nullptr);

  void on_event(const trace_record& r) noexcept override;

  /// Out of host memory while recording: the entries are incomplete.
  bool failed() const noexcept { return failed_; }
  /// The reserved bytes the recorded segment entries add up to.
  std::size_t reserved_bytes() const noexcept { return reserved_; }

 private:
  void record(const trace_record& r);
  void push(std::string_view action, std::uint64_t addr, std::size_t size, std::uint64_t stream);
  void map_range(std::uint64_t addr, std::size_t bytes);
  void unmap_range(std::uint64_t addr, std::size_t bytes);
  /// Mapped bytes inside [addr, addr + bytes).
  std::size_t mapped_within(std::uint64_t addr, std::size_t bytes) const;

  std::vector<placed_trace_entry>& out_;
  std::size_t capacity_bytes_ = 0;
  const std::uint64_t* clock_ns_ = nullptr;
  std::string phase_;
  std::unordered_map<std::uint64_t, std::size_t> requested_;  ///< Live block address -> requested bytes.
  std::map<std::uint64_t, std::size_t> mapped_;               ///< Mapped runs, start -> bytes, merged.
  std::unordered_map<std::uint64_t, std::size_t> allocated_;  ///< Segments made by segment_alloc -> bytes.
  std::size_t reserved_ = 0;
  bool failed_ = false;
};

}  // namespace phasealloc
