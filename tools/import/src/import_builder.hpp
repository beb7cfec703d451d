// Turns address-based allocator records (snapshot actions, profiler events, RMM log rows) into an
// address-free trace. Shared by the importers (private header).
//
// Design note
// Rationale: every foreign format names allocations by pointer, and recordings often start
//   mid-run: a free may name an address the recording never saw allocated, and blocks may still be
//   live at the end without an alloc in the recording. A replay needs both to exist as allocations,
//   or it would undercount live memory (the two mid-run cs336 snapshots hold 500 MiB of such blocks).
// Approach: live addresses map to provisional ids. A free of an unknown address creates a
//   "seeded" allocation (it existed before recording); so does a block reported live at the end
//   whose address is not live in the recording. finish() numbers seeded allocations first (in
//   address order: the order a caching allocator most likely handed them out within a segment),
//   then the recorded ones in order, and emits the seeded ones at time 0 before everything else.
//   Segments get the same treatment in their own id namespace. An alloc on an address that is
//   still live means a free was lost (a ring buffer wrapped): the old allocation is freed first
//   and the event counted as an implicit free.
//   Time: the first timestamp is time 0; a timestamp earlier than the previous one is clamped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"
#include "phasealloc/trace/trace_format.hpp"
#include "start_layout.hpp"

namespace phasealloc::detail {

class import_builder {
 public:
  explicit import_builder(trace_metadata meta);

  /// Sets the time of the following events (any monotonic ns clock; the first call is the origin).
  void set_time_ns(std::uint64_t raw_ns);

  void alloc(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);
  void free(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);
  void segment_alloc(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);
  void segment_free(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);
  void segment_map(std::uint64_t bytes, std::uint64_t stream);
  void segment_unmap(std::uint64_t bytes, std::uint64_t stream);
  void oom(std::uint64_t bytes, std::uint64_t stream);
  void empty_cache();
  void phase(std::string_view name);

  /// End-of-recording state: seeds the block / segment when its address is not live.
  void live_at_end_alloc(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);
  void live_at_end_segment(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);
  /// Seeds an allocation / segment with no address (a baseline known only by its size: the bytes a
  /// profiler reports live before its first event). Numbered after the seeded ones with addresses.
  void seed_alloc(std::uint64_t bytes, std::uint64_t stream);
  void seed_segment(std::uint64_t bytes, std::uint64_t stream);

  /// The allocator's layout when recording began (start_layout.hpp): finish() writes it as seeded
  /// segments with seed_block events (a version 2 trace) when every allocated block in it is a
  /// seeded allocation at the same address; else as before, and "import.layout" says why not.
  void set_layout(std::vector<layout_segment> layout);
  /// The layout could not be known: why ("import.layout" = "not used: <why>").
  void layout_unknown(std::string_view why) { layout_note_ = "not used: " + std::string(why); }

  /// The trace, with import.* counts added to the metadata properties.
  trace finish();

 private:
  struct object {
    std::uint64_t addr = 0;
    std::uint64_t bytes = 0;
    std::uint32_t stream = 0;
    bool seeded = false;
    bool has_address = true;
    bool referenced = false;  // seeded: a later event names it
  };
  struct book {
    std::vector<object> objects;                               // by provisional id
    std::unordered_map<std::uint64_t, std::uint64_t> live;     // addr -> provisional id
  };

  std::uint32_t stream_ordinal(std::uint64_t handle);
  void push(trace_event_op op, std::uint64_t id, std::uint64_t bytes, std::uint32_t stream, std::uint32_t name = 0);
  void create(book& b, trace_event_op op, trace_event_op free_op, std::uint64_t addr, std::uint64_t bytes,
              std::uint64_t stream);
  void destroy(book& b, trace_event_op op, std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);
  void seed_if_dead(book& b, std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);
  void seed_anonymous(book& b, std::uint64_t bytes, std::uint64_t stream);
  static std::vector<std::uint64_t> final_ids(const book& b, std::vector<std::uint64_t>& seeded_order);

  /// Emits the layout's segments and blocks; false (nothing emitted) when it does not match the seeds.
  bool emit_layout(std::vector<trace_event>& events, const std::vector<std::uint64_t>& alloc_ids,
                   const std::vector<std::uint64_t>& segment_ids, std::vector<bool>& segment_done);

  trace trace_;
  std::optional<std::vector<layout_segment>> layout_;
  std::string layout_note_;
  book allocs_;
  book segments_;
  std::unordered_map<std::uint64_t, std::uint32_t> streams_;
  bool have_origin_ = false;
  std::uint64_t origin_ns_ = 0;
  std::uint64_t now_ns_ = 0;
  std::uint64_t implicit_frees_ = 0;
  std::uint64_t clamped_times_ = 0;
};

/// The trace an importer built, or the first reason it is not a valid trace (a size above what a
/// trace may hold, ...), as the importer's error: foreign input must never become a trace that
/// replay refuses or an engine cannot take.
result<trace, trace_error> valid_import(trace t, std::string_view source_name);

}  // namespace phasealloc::detail
