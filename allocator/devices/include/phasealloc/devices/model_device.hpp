// model_device: a deterministic simulated GPU (no CUDA anywhere).
//
// Used by the engine's tests, the replay tool and the benches. It keeps exact books of what a real
// device would hold, checks every precondition of device.hpp, and adds what tests need and a real
// GPU cannot give: events that complete only when told, fault injection on call N, call counters
// and a modelled cost per call.
//
// Two modes (model_device_config::virtual_memory):
//   false  like cudaMalloc: reserve() takes address space AND memory for the whole range, map()
//          and unmap() answer not_supported, release() frees the memory too.
//   true   like cuMem VMM: reserve() takes address space only; map()/unmap() back or return any
//          granule-aligned subrange of a live reservation; release() needs it wholly unmapped.
//
// Addresses are fake (never dereference them) and placed as the CUDA driver places cudaMalloc:
// each reservation takes the top of the highest free range of the model device's address window
// [address_base, address_base + address_window_bytes) that fits it, so a new segment sits below
// the older ones; a released range is free again (merged with free neighbours), and reservations
// may be adjacent, with no hole between them. simcuda's cudaMalloc and cuMemAddressReserve place
// by the same rule, so a replay on this model device and PyTorch's own allocator on simcuda see the same
// address order (a hole here would let a released range take a request simcuda's cannot).
// Why the order matters: PyTorch's allocator breaks ties between equal-size free blocks by address
// (torch 2.11), or by segment age and then address (torch 2.15; pytorch_policy.cpp), so where
// segments land changes what it decides. Evidence: a PPO job (bench/gpu/rlhf_ppo.py, GPT-2 small,
// 3 steps, torch 2.11) on a real H200 reserved 5624561664 bytes (5.24 GiB) in 181 cudaMalloc
// segments, the driver handing out mostly descending addresses; its recorded trace replayed
// through the same torch on the H200 gives the same 5.24 GiB / 181. On simcuda with lowest-first
// placement, and in this model device as the bump pointer it was (ascending, never reused), the replay gave
// 5.04 GiB / 166 (177 MiB and 15 segments less); top-down in both it gives 5.24 GiB / 181.
// Limitations: the driver's placement is mostly, not strictly, top-down (other contexts, its own
// allocations, page-size pools); this is the rule, not the driver. Released ranges are handed out
// again, so a stale pointer may alias a newer reservation (as on a GPU); map()/unmap() still refuse
// a range of no live reservation.
//
// Thread-safe: one mutex guards the books, because benches share one model device between engines.
//
// Limitations (what a real GPU does and the model device does not): free_bytes() is exactly capacity minus
// mapped bytes, with no CUDA context or other process taking a share; physical memory never
// fragments, so a request no larger than free_bytes() never fails for lack of contiguous pages;
// events complete only when told (or at once), never "eventually".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "phasealloc/device.hpp"

namespace phasealloc {

/// Bottom of a model_device's address window (rounded up to its granularity).
inline constexpr device_address model_address_base = 0x7f00'0000'0000;
/// Size of a model_device's address window (64 TiB), handed out from the top. Give each model device of a
/// process its own window (model_address_base + ordinal * this).
inline constexpr device_address model_address_window_bytes = device_address{1} << 46;

/// Modelled cost of each call. The model device adds it to modeled_time_ns(); with spin it also busy-waits
/// that long (outside its lock), so a bench can feel a slow driver.
struct model_device_cost {
  std::uint64_t reserve_ns = 0;        ///< Per reserve() call.
  std::uint64_t release_ns = 0;        ///< Per release() call.
  std::uint64_t map_ns = 0;            ///< Per map() call.
  std::uint64_t unmap_ns = 0;          ///< Per unmap() call.
  std::uint64_t map_granule_ns = 0;    ///< Per granule a successful map() backs (cuMemCreate + cuMemMap per page).
  std::uint64_t unmap_granule_ns = 0;  ///< Per granule a successful unmap() returns.
  std::uint64_t event_ns = 0;          ///< Per create/record/query/destroy_event() call.
  std::uint64_t sync_ns = 0;           ///< Per synchronize_event() and synchronize() call.
  bool spin = false;                   ///< Also busy-wait the modelled time.
};

struct model_device_config {
  std::size_t capacity_bytes = 80 * gib;   ///< Memory the device has (mapped bytes count against it).
  std::size_t granularity_bytes = 2 * mib; ///< Unit of reserve/map/unmap sizes and addresses (> 0).
  bool virtual_memory = false;             ///< false: cudaMalloc-like; true: cuMem VMM-like.
  bool events_complete_immediately = true; ///< false: events stay incomplete until completed by hand.
  /// offload()/restore() (virtual memory only): an offloaded range's memory is the host's, counted
  /// in host_backed_bytes() instead of against the capacity, until restored or unmapped whole.
  bool host_backing = false;
  /// The address window [address_base, address_base + address_window_bytes), handed out from the
  /// top down. Give each model device of a process its own window (e.g. address_base = model_address_base +
  /// ordinal * model_address_window_bytes) so that their fake addresses never overlap.
  device_address address_base = model_address_base;
  device_address address_window_bytes = model_address_window_bytes;
  model_device_cost cost{};
};

/// The calls fault injection can target (destroy_event returns nothing, so it cannot fail).
enum class model_device_call : std::uint8_t {
  reserve,
  release,
  map,
  unmap,
  create_event,
  record_event,
  query_event,
  synchronize_event,
  synchronize,
  offload,
  restore,
};
inline constexpr std::size_t model_device_call_count = 11;

/// How often each primitive was called (failed calls included), and how many calls failed.
struct model_device_counters {
  std::uint64_t reserve = 0;
  std::uint64_t release = 0;
  std::uint64_t map = 0;
  std::uint64_t unmap = 0;
  std::uint64_t create_event = 0;
  std::uint64_t record_event = 0;
  std::uint64_t query_event = 0;
  std::uint64_t synchronize_event = 0;
  std::uint64_t destroy_event = 0;
  std::uint64_t synchronize = 0;
  std::uint64_t offload = 0;
  std::uint64_t restore = 0;
  std::uint64_t failed = 0;  ///< Calls that answered an error (injected ones included).
};

class model_device final : public device {
 public:
  explicit model_device(model_device_config config = {});

  // --- device ---------------------------------------------------------------------------------
  std::string_view name() const noexcept override { return "model"; }
  const device_caps& caps() const noexcept override { return caps_; }

  result<device_address> reserve(std::size_t bytes) noexcept override;
  errc release(device_address base, std::size_t bytes) noexcept override;
  errc map(device_address addr, std::size_t bytes) noexcept override;
  errc unmap(device_address addr, std::size_t bytes) noexcept override;
  std::size_t free_bytes() const noexcept override;

  result<event_id> create_event() noexcept override;
  errc record_event(event_id event, stream_id stream) noexcept override;
  result<bool> query_event(event_id event) noexcept override;
  /// Completes the event and everything recorded before it on its stream.
  errc synchronize_event(event_id event) noexcept override;
  void destroy_event(event_id event) noexcept override;
  /// Completes every recorded event.
  errc synchronize() noexcept override;

  /// With config().host_backing (else not_supported): the books of a same-address offload. The
  /// range stays mapped (its addresses reserved and valid) while its memory is the host's; restore
  /// needs the capacity for it again (out_of_memory otherwise, changing nothing). `after` events
  /// must be live. Bytes are not modelled (addresses are fake): moved() counts the live bytes.
  errc offload(device_address addr, std::size_t bytes, std::span<const byte_range> live,
               std::span<const event_id> after) noexcept override;
  errc restore(device_address addr, std::size_t bytes, std::span<const byte_range> live,
               std::span<const event_id> after) noexcept override;
  std::size_t host_backed_bytes() const noexcept override;
  moved_bytes moved() const noexcept override;

  // --- model device only: events -----------------------------------------------------------------------
  /// Completes every event recorded so far on `stream` (the stream "ran").
  void complete_events(stream_id stream) noexcept;
  void complete_all_events() noexcept;
  /// Events recorded and not yet complete.
  std::size_t incomplete_events() const noexcept;
  /// Events created and not destroyed (a leak check for engine tests).
  std::size_t live_events() const noexcept;

  // --- model device only: fault injection ----------------------------------------------------------------
  /// The call of kind `which` after `after_n_calls` more calls of that kind fails with `code`,
  /// changing nothing (0: the very next one). One pending fault per kind; a new one replaces it.
  void fail_next(model_device_call which, errc code, unsigned after_n_calls = 0) noexcept;
  void clear_faults() noexcept;

  // --- model device only: books --------------------------------------------------------------------------
  model_device_counters counters() const noexcept;
  /// Sum of the modelled cost of every call so far.
  std::uint64_t modeled_time_ns() const noexcept;
  /// Zeroes counters() and modeled_time_ns() (not the books).
  void reset_counters() noexcept;
  /// Bytes backed by memory (counted against capacity). Without virtual memory: reserved bytes.
  std::size_t mapped_bytes() const noexcept;
  /// Address space held by live reservations.
  std::size_t reserved_bytes() const noexcept;
  std::size_t live_reservations() const noexcept;
  /// true when every granule of [addr, addr+bytes) lies in a live reservation and is mapped.
  bool is_mapped(device_address addr, std::size_t bytes) const noexcept;
  const model_device_config& config() const noexcept { return config_; }

 private:
  struct reservation {
    std::size_t size_bytes = 0;
    std::size_t mapped_bytes = 0;
    /// Mapped runs (virtual memory only): start -> end, disjoint and never adjacent (merged), so
    /// the books stay small however large the reservation.
    std::map<device_address, device_address> mapped_runs;
  };
  struct event_state {
    stream_id stream = 0;
    std::uint64_t seq = 0;  ///< 0: never recorded (complete, as cudaEventQuery says).
  };
  struct stream_state {
    std::uint64_t recorded_seq = 0;   ///< seq of the last record on the stream.
    std::uint64_t completed_seq = 0;  ///< Every record with seq <= this has completed.
  };
  struct pending_fault {
    errc code = errc::ok;
    unsigned calls_left = 0;
  };

  // All below are called with mutex_ held.
  bool take_fault(model_device_call which, errc& code) noexcept;
  errc fail(errc code) noexcept;
  /// The reservation holding [addr, addr+bytes) wholly, or nullptr.
  reservation* find_range(device_address addr, std::size_t bytes) noexcept;
  const reservation* find_range(device_address addr, std::size_t bytes) const noexcept;
  bool aligned(std::size_t value) const noexcept { return value % caps_.granularity_bytes == 0; }
  bool event_complete(const event_state& e) const noexcept;
  /// Whether [addr, addr+bytes) overlaps an offloaded range.
  bool overlaps_host_run(device_address addr, std::size_t bytes) const noexcept;
  /// offload/restore's checks of `live` and `after`.
  bool valid_moves(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                   std::span<const event_id> after) const noexcept;
  /// Accounts `ns` of modelled time (and of spinning, done by finish() after the lock drops).
  void charge(std::uint64_t ns) noexcept;
  /// The top `bytes` of the highest free address range that holds them, taken; nullopt when none.
  std::optional<device_address> take_address_range(std::size_t bytes) noexcept;
  /// [start, start + bytes) free again, merged with its free neighbours.
  void give_address_range(device_address start, std::size_t bytes) noexcept;
  /// Ends a call: drops the lock, then spins what the call charged when cost.spin is set.
  void finish(std::unique_lock<std::mutex>& lock) noexcept;
  void complete_all_locked() noexcept;

  const model_device_config config_;
  const device_caps caps_;

  mutable std::mutex mutex_;
  std::map<device_address, reservation> reservations_;
  /// Free address ranges of the window (start -> length), disjoint and never adjacent; a
  /// reservation takes the top of the highest one that fits it.
  std::map<device_address, device_address> free_ranges_;
  std::size_t mapped_bytes_ = 0;
  std::size_t reserved_bytes_ = 0;
  /// Offloaded ranges (start -> bytes): mapped in their reservation's runs, not in mapped_bytes_.
  std::map<device_address, std::size_t> host_runs_;
  std::size_t host_bytes_ = 0;
  moved_bytes moved_{};
  std::unordered_map<event_id, event_state> events_;
  std::unordered_map<stream_id, stream_state> streams_;
  event_id next_event_ = 1;
  std::uint64_t next_seq_ = 1;
  std::array<std::optional<pending_fault>, model_device_call_count> faults_{};
  model_device_counters counters_{};
  std::uint64_t modeled_time_ns_ = 0;
  std::uint64_t pending_spin_ns_ = 0;  ///< Charged by the current call, spun by finish().
};

}  // namespace phasealloc
