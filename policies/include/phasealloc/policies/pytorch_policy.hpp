// `pytorch`: a faithful model of PyTorch's native CUDACachingAllocator policy, the baseline every
// phasealloc report compares against.
//
// Configuration: the PYTORCH_CUDA_ALLOC_CONF keys, pasted unchanged after "pytorch:", e.g.
//   pytorch:max_split_size_mb:200,roundup_power2_divisions:[256:1,512:2,>:8],
//           garbage_collection_threshold:0.6,per_process_memory_fraction:0.9
// and one key of phasealloc's own, block_order:segment_age|address, the torch version's order of
// equal-size free blocks (left out of PYTORCH_CUDA_ALLOC_CONF by `--engine torch`).
// What each key does and where this model differs from torch: pytorch_policy.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/policies/pytorch_rounding.hpp"
#include "phasealloc/policy.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc {

/// The effective settings, in bytes (torch's keys are in MB, i.e. MiB).
struct pytorch_policy_options {
  std::size_t max_split_bytes = SIZE_MAX;              ///< max_split_size_mb (SIZE_MAX: unlimited).
  std::size_t max_non_split_rounding_bytes = 20 * mib; ///< max_non_split_rounding_mb.
  pytorch_divisions roundup_divisions{};               ///< roundup_power2_divisions.
  double garbage_collection_threshold = 0.0;           ///< 0: off.
  bool expandable_segments = false;
  std::size_t large_segment_bytes = 20 * mib;          ///< large_segment_size_mb (kLargeBuffer).
  double memory_fraction = 1.0;                        ///< per_process_memory_fraction.
  /// block_order (phasealloc's key, not torch's): which PyTorch's order of equal-size free blocks
  /// is modelled. true ("segment_age", the default): oldest segment first, then address (torch
  /// 2.15); false ("address"): address only (torch 2.11). See pytorch_policy.cpp.
  bool segment_age_order = true;
};

class pytorch_policy final : public policy {
 public:
  using options = pytorch_policy_options;
  static constexpr pool_id small_pool = 0;  ///< Rounded requests <= 1 MiB (kSmallSize).
  static constexpr pool_id large_pool = 1;

  static constexpr std::size_t small_size_bytes = mib;          ///< kSmallSize.
  static constexpr std::size_t small_buffer_bytes = 2 * mib;    ///< kSmallBuffer.
  static constexpr std::size_t min_large_alloc_bytes = 10 * mib;  ///< kMinLargeAlloc.
  static constexpr std::size_t round_large_bytes = 2 * mib;     ///< kRoundLarge.

  explicit pytorch_policy(options opts = {});
  /// Reads PYTORCH_CUDA_ALLOC_CONF keys; errors name the key and list the valid ones.
  static result<std::unique_ptr<policy>, std::string> create(std::string_view conf);
  static result<options, std::string> parse(std::string_view conf);

  const options& settings() const noexcept { return opts_; }

  std::string spec() const override;
  std::span<const pool_traits> pools() const noexcept override { return pools_; }
  std::size_t round_bytes(std::size_t requested_bytes) const noexcept override;
  pool_id pool_for(const alloc_request& request, std::size_t rounded_bytes) const noexcept override;
  std::size_t segment_bytes(pool_id pool, std::size_t rounded_bytes) const noexcept override;
  bool may_use(pool_id pool, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept override;
  bool should_split(pool_id pool, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept override;
  /// Yes: this is the allocator the recordings come from.
  bool models_recorded_allocator() const noexcept override { return true; }
  double memory_fraction() const noexcept override { return opts_.memory_fraction; }
  release_plan before_grow(const grow_context& context) override;
  release_plan on_oom(const grow_context& context) override;
  release_plan on_empty_cache() override;

 private:
  static release_step release_cached_blocks();

  options opts_;
  std::vector<pool_traits> pools_;
};

}  // namespace phasealloc
