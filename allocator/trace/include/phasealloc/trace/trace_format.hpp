// The one versioned, address-free trace format: what the recorder writes, what importers produce,
// and what the replay tool consumes.
//
// Design note
// Rationale: rmm's log/replay pair drifted apart (stream written in hex, read in decimal; frees
//   matched by raw pointer, so a replay relied on address reuse). Here a free names the id of its
//   allocation, streams are small ordinals given at first sight, time is integer nanoseconds from
//   the start, and phases are events. One in-memory struct, one binary codec and one text codec
//   (trace_binary.hpp, trace_text.hpp), both guarded by round-trip tests.
// Approach: a trace is a string table, a flat vector of fixed-size events and a little metadata.
//   Every op uses the same event struct; the table below says which fields it uses. Unused fields
//   are zero by convention (the codecs keep whatever is there, so round trips are exact).
//
//   op             alloc_id                  bytes              stream  tag  name
//   alloc          new allocation id         requested size     yes     yes  -
//   free           id of the allocation      its requested size yes     -    -
//   record_stream  id of the allocation      -                  yes     -    -
//   phase          -                         -                  -       -    string index of the
//                                                                            phase that becomes
//                                                                            current ("" = none)
//   empty_cache    -                         -                  -       -    -
//   segment_alloc  new segment id            segment size       yes     -    -
//   segment_free   id of the segment         segment size       yes     -    -
//   segment_map    segment id when known     bytes mapped       yes     -    -
//   segment_unmap  segment id when known     bytes unmapped     yes     -    -
//   oom            -                         requested size     yes     -    -
//   seed_block     id of the allocation in   block size         yes     -    -
//                  it (allocated), else 0
//   offload        id of the allocation      the call's ordinal -       -    -
//   restore        id of the allocation      the call's ordinal -       -    -
//
//   Allocation ids and segment ids are separate namespaces. Segment events are what the recording
//   allocator observed (device calls); a replay does not follow them, it may compare against them.
//   `flags & trace_flag::seeded` marks an allocation or segment that already existed when
//   recording began (a snapshot taken mid-run); seeded events come first, at time 0.
//   Recorded layout (version 2): a seeded segment_alloc may be followed by seed_block events, its
//   blocks in address order, tiling it exactly: the allocator's layout when recording began. Its
//   flags say which pool (small_pool) and whether it is an expandable reservation (expandable); its
//   bytes are then the mapped bytes and its blocks (mapped or `unmapped`) tile the reservation's
//   span from its first mapped byte. A block flagged `allocated` holds the seeded allocation
//   alloc_id (seeded allocs come before the layout; bytes >= its requested size); the others are
//   free (cached) or unmapped. A trace without seed_block events is version 1, as before.
//   Offload (version 3): the allocations one engine::offload or engine::restore call named, one
//   event each, consecutive, with the call's ordinal as bytes: a replay makes the same call.
// Limitations: one device per trace (a multi-GPU job writes one file per process and device);
//   no threads (the engine serialises a device's calls, and ordering is what a replay needs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace phasealloc {

/// Newest version this build reads and writes; readers accept 1..trace_format_version. A trace is
/// written with its own `version`: 1 unless it holds a recorded layout (seed_block events: 2) or
/// offload and restore events (3).
inline constexpr std::uint32_t trace_format_version = 3;
/// The version of a trace without a recorded layout.
inline constexpr std::uint32_t trace_format_version_plain = 1;
/// The first version with seed_block events.
inline constexpr std::uint32_t trace_format_version_layout = 2;
/// The first version with offload and restore events.
inline constexpr std::uint32_t trace_format_version_offload = 3;

enum class trace_event_op : std::uint8_t {
  alloc = 0,
  free = 1,
  phase = 2,
  empty_cache = 3,
  record_stream = 4,
  segment_alloc = 5,
  segment_free = 6,
  segment_map = 7,
  segment_unmap = 8,
  oom = 9,
  seed_block = 10,
  offload = 11,
  restore = 12,
};
inline constexpr std::size_t trace_event_op_count = 13;

/// The op's name in text traces ("alloc", "free", ..., "segment_unmap", "oom", "seed_block").
std::string_view to_string(trace_event_op op) noexcept;
/// The op named `name`, or nothing.
std::optional<trace_event_op> parse_trace_event_op(std::string_view name) noexcept;

namespace trace_flag {
inline constexpr std::uint8_t seeded = 1;  ///< Existed before recording began (alloc, segment_alloc, seed_block).
inline constexpr std::uint8_t small_pool = 2;  ///< Seeded segment_alloc: of the small pool (else large).
inline constexpr std::uint8_t expandable = 4;  ///< Seeded segment_alloc: an expandable reservation.
inline constexpr std::uint8_t allocated = 8;   ///< seed_block: holds the seeded allocation alloc_id.
inline constexpr std::uint8_t unmapped = 16;   ///< seed_block: no memory behind it (expandable segments).
inline constexpr std::uint8_t all = seeded | small_pool | expandable | allocated | unmapped;
}  // namespace trace_flag

/// Flags in text traces: "-" or names joined by '|' ("seeded|small_pool"); parse gives nothing for
/// an unknown name.
std::string format_trace_flags(std::uint8_t flags);
std::optional<std::uint8_t> parse_trace_flags(std::string_view text) noexcept;

struct trace_event {
  trace_event_op op = trace_event_op::alloc;
  std::uint8_t flags = 0;      ///< trace_flag bits.
  std::uint32_t stream = 0;    ///< Stream ordinal; 0 is the default stream.
  std::uint64_t time_ns = 0;   ///< Nanoseconds since the start of the trace.
  std::uint64_t alloc_id = 0;  ///< Allocation id, or segment id for segment ops.
  std::uint64_t bytes = 0;
  std::uint32_t tag = 0;       ///< Opaque caller tag of an allocation (0 = none).
  std::uint32_t name = 0;      ///< Index into trace::strings (phase events).

  friend bool operator==(const trace_event&, const trace_event&) = default;
};

struct trace_property {
  std::string key;
  std::string value;
  friend bool operator==(const trace_property&, const trace_property&) = default;
};

struct trace_metadata {
  std::string source;                       ///< Where it came from: "recorder", "pytorch snapshot x.pickle", ...
  std::string allocator_settings;           ///< The recording allocator's settings, PYTORCH_CUDA_ALLOC_CONF grammar.
  std::uint64_t device_capacity_bytes = 0;  ///< Total device memory; 0 = unknown.
  std::uint32_t stream_count = 1;           ///< Stream ordinals used are < stream_count.
  std::vector<trace_property> properties;   ///< Anything else worth keeping (importer counts, raw flags).

  friend bool operator==(const trace_metadata&, const trace_metadata&) = default;
};

struct trace {
  std::uint32_t version = trace_format_version_plain;
  std::vector<std::string> strings;  ///< Phase names (and any other names events refer to).
  std::vector<trace_event> events;
  trace_metadata meta;

  friend bool operator==(const trace&, const trace&) = default;
};

/// Index of `text` in t.strings, appending it when absent. Linear: string tables are small.
std::uint32_t intern_string(trace& t, std::string_view text);

/// The value of property `key`, or nullptr.
const std::string* find_property(const trace_metadata& meta, std::string_view key) noexcept;
/// Sets (or replaces) property `key`.
void set_property(trace_metadata& meta, std::string_view key, std::string_view value);

}  // namespace phasealloc
