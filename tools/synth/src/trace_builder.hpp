// Emits the events of a synthesized trace and keeps the books a simulated tensor needs.
//
// Design note
// Rationale: PyTorch frees a tensor's storage when its last reference goes: the Python variable,
//   an autograd node that saved it, a cache that holds it. Simulating that reference count is
//   what makes frees land where they land in a real job (a saved activation outlives its local
//   variable; a KV tensor outlives the step that made it).
// Approach: ids are dense (1, 2, ...), so per-id state lives in vectors. alloc() gives one
//   reference; retain() / release() add and drop; the free event goes out when the count hits
//   zero. Time only moves through advance_ns(); events carry the current time.
// Limitations: past `max_events` the builder stops recording and reports overflow (the caller
//   turns that into an error); books are still kept so the simulation stays consistent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "phasealloc/synth/alloc_tag.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc::detail::synth {

using alloc_id = std::uint64_t;  ///< 0 = no allocation.

/// Stream ordinals used by synthesized traces.
inline constexpr std::uint32_t compute_stream = 0;
inline constexpr std::uint32_t copy_stream = 1;  ///< Host-to-device staging of offloaded data.

class trace_builder {
 public:
  explicit trace_builder(std::size_t max_events);

  /// A new allocation of `bytes` (0 bytes gives id 0: PyTorch never calls the allocator for them).
  alloc_id alloc(std::size_t bytes, alloc_tag tag, std::uint32_t stream = compute_stream);
  /// The allocation made the first time `key` is asked for, kept for the rest of the trace
  /// (library workspaces).
  alloc_id alloc_once(std::string_view key, std::size_t bytes, alloc_tag tag);
  void retain(alloc_id id);
  /// Drops one reference; frees at zero. Id 0 is ignored.
  void release(alloc_id id);
  /// The allocation is used on `stream` too (tensor.record_stream).
  void record_stream(alloc_id id, std::uint32_t stream);
  std::uint32_t references(alloc_id id) const;
  std::size_t bytes_of(alloc_id id) const;

  void phase(std::string_view name);
  void empty_cache();
  void advance_ns(std::uint64_t ns) noexcept { now_ns_ += ns; }
  std::uint64_t now_ns() const noexcept { return now_ns_; }

  std::size_t live_bytes() const noexcept { return live_bytes_; }
  std::size_t peak_live_bytes() const noexcept { return peak_live_bytes_; }
  bool overflowed() const noexcept { return overflowed_; }
  std::size_t event_count() const noexcept { return trace_.events.size(); }

  /// The trace so far (the builder is empty afterwards).
  trace take();

 private:
  struct slot {
    std::uint64_t bytes = 0;
    std::uint32_t references = 0;
    std::uint32_t stream = 0;
  };
  void push(trace_event e);

  trace trace_;
  std::vector<slot> slots_;  // by id; slot 0 unused
  std::vector<std::pair<std::string, alloc_id>> once_;
  std::size_t max_events_;
  std::uint64_t now_ns_ = 0;
  std::size_t live_bytes_ = 0;
  std::size_t peak_live_bytes_ = 0;
  std::uint32_t max_stream_ = 0;
  bool overflowed_ = false;
};

}  // namespace phasealloc::detail::synth
