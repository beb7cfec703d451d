// Statistics named like torch.cuda.memory_stats(), plus per-phase measures.
//
// A stat has PyTorch's four fields: current, peak, allocated (sum of increases), freed (sum of
// decreases). Each is kept for all pools and split into small_pool / large_pool, so
// "allocated_bytes.all.current" means here what it means in PyTorch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "phasealloc/types.hpp"

namespace phasealloc {

struct stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void increase(std::int64_t amount) noexcept {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t amount) noexcept {
    current -= amount;
    freed += amount;
  }
  void reset_peak() noexcept { peak = current; }
  void reset_accumulated() noexcept { allocated = freed = 0; }
};

enum class stat_type : std::size_t { all = 0, small_pool = 1, large_pool = 2 };
inline constexpr std::size_t stat_type_count = 3;

/// One stat for all pools, the small pools and the large pools.
struct stat_array {
  std::array<stat, stat_type_count> by_type{};

  stat& operator[](stat_type t) noexcept { return by_type[static_cast<std::size_t>(t)]; }
  const stat& operator[](stat_type t) const noexcept { return by_type[static_cast<std::size_t>(t)]; }
  void increase(bool small, std::int64_t amount) noexcept {
    by_type[0].increase(amount);
    by_type[small ? 1 : 2].increase(amount);
  }
  void decrease(bool small, std::int64_t amount) noexcept {
    by_type[0].decrease(amount);
    by_type[small ? 1 : 2].decrease(amount);
  }
};

/// The engine's global books, in PyTorch's DeviceStats vocabulary.
struct device_stats {
  stat_array allocation;            ///< Allocated blocks (count).
  stat_array segment;               ///< Segments (count).
  stat_array active;                ///< Allocated or pending-free blocks (count).
  stat_array inactive_split;        ///< Free blocks that are part of a split segment (count).
  stat_array allocated_bytes;       ///< Bytes of allocated blocks (rounded sizes).
  stat_array reserved_bytes;        ///< Bytes the device holds for us (mapped).
  stat_array active_bytes;          ///< Bytes of allocated or pending-free blocks.
  stat_array inactive_split_bytes;  ///< Bytes of free blocks in split segments.
  stat_array requested_bytes;       ///< Bytes callers asked for (unrounded).
  /// Bytes of mapped pages whose memory is the host's (engine::offload): not in reserved_bytes.
  /// `allocated` sums the bytes offloaded, `freed` those restored or freed while offloaded.
  stat_array offloaded_bytes;

  std::int64_t num_alloc_retries = 0;     ///< Retries after an out-of-memory release, made or failed
                                          ///< (release_step::retry_rule::counted).
  std::int64_t num_ooms = 0;              ///< Allocations that failed.
  std::int64_t num_sync_all_streams = 0;  ///< Releases that waited for all pending events.
  std::int64_t num_device_alloc = 0;      ///< Segments reserved (cudaMalloc / cuMemAddressReserve).
  std::int64_t num_device_free = 0;       ///< Segments released.
  std::int64_t num_device_map = 0;        ///< map calls (virtual-memory devices).
  std::int64_t num_device_unmap = 0;      ///< unmap calls.
  std::int64_t num_misuse = 0;            ///< Unknown pointers, double frees, size mismatches.
  std::int64_t oversize_allocations = 0;  ///< Allocations the policy would not split (kept for torch parity).
  std::int64_t oversize_segments = 0;
  std::int64_t num_offloads = 0;          ///< Page ranges offloaded.
  std::int64_t num_restores = 0;          ///< Page ranges restored.
  std::int64_t num_restore_ooms = 0;      ///< Restores the device had no memory for (the bytes stayed on the host).
  /// Bytes of blocks asked to leave that stayed on the device: their pages are shared with blocks
  /// that stay (the first and last page of an untagged block, usually).
  std::int64_t offload_kept_bytes = 0;

  /// Calls f(stat_array&) for each of the ten arrays above.
  template <class F>
  void for_each_array(F&& f) {
    for (stat_array* a : {&allocation, &segment, &active, &inactive_split, &allocated_bytes, &reserved_bytes,
                          &active_bytes, &inactive_split_bytes, &requested_bytes, &offloaded_bytes}) {
      f(*a);
    }
  }
};

/// Measures of one named phase, aggregated over every interval the phase was current.
struct phase_stats {
  std::string name;
  std::int64_t intervals = 0;              ///< Times the phase became current.
  std::int64_t peak_allocated_bytes = 0;
  std::int64_t peak_reserved_bytes = 0;
  std::int64_t peak_active_bytes = 0;
  std::int64_t peak_requested_bytes = 0;
  /// reserved - allocated at the moment reserved peaked in this phase.
  std::int64_t reserved_unallocated_at_peak_bytes = 0;
  /// Largest free (mapped) block at the moment reserved peaked in this phase.
  std::int64_t largest_free_block_at_peak_bytes = 0;
  std::int64_t num_allocs = 0;
  std::int64_t num_frees = 0;
  std::int64_t num_device_alloc = 0;
  std::int64_t num_device_free = 0;
  std::int64_t num_device_map = 0;
  std::int64_t num_device_unmap = 0;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  std::int64_t released_bytes = 0;         ///< Bytes returned to the device during the phase.
  std::int64_t offloaded_bytes = 0;        ///< Bytes of pages offloaded during the phase.
  std::int64_t restored_bytes = 0;         ///< Bytes of pages restored during the phase.

  /// 1 - peak allocated / peak reserved (0 when nothing was reserved). Offloaded blocks are
  /// allocated but not reserved: a phase that offloads may show more allocated than reserved, and
  /// its fragmentation is then 0, not negative.
  double fragmentation() const noexcept {
    return peak_reserved_bytes > peak_allocated_bytes
               ? 1.0 - static_cast<double>(peak_allocated_bytes) / static_cast<double>(peak_reserved_bytes)
               : 0.0;
  }
};

/// The flat "key" -> value view of device_stats, with torch.cuda.memory_stats() key names
/// ("allocated_bytes.all.current", "num_alloc_retries", ...).
std::vector<std::pair<std::string, std::int64_t>> to_memory_stats(const device_stats& stats);

}  // namespace phasealloc
