// `basic`: the simplest honest policy, the engine's test partner.
//
// Two pools: small (requests up to 1 MiB, served from 2 MiB segments) and large (segments
// sized to the request, rounded to 2 MiB). Sizes round to 512 bytes. A block is split when the
// remainder is worth keeping (>= 512 bytes in the small pool, > 1 MiB in the large). On an
// out-of-memory it releases every cached segment once and retries. No phase behaviour.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/policy.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc {

struct basic_policy_options {
  std::size_t small_limit_bytes = mib;      ///< Largest request served by the small pool.
  std::size_t small_segment_bytes = 2 * mib;
  std::size_t large_round_bytes = 2 * mib;  ///< Large segments are the request rounded to this.
  bool expandable_large = false;            ///< Large pool grows by pages of large_round_bytes
                                            ///< (on a virtual-memory device).
};

class basic_policy final : public policy {
 public:
  using options = basic_policy_options;

  explicit basic_policy(options opts = {});
  /// Reads "small_limit:1MiB,small_segment:2MiB,large_round:2MiB,expandable_large:false" (any subset).
  static result<std::unique_ptr<policy>, std::string> create(std::string_view conf);

  std::string spec() const override;
  std::span<const pool_traits> pools() const noexcept override { return pools_; }
  std::size_t round_bytes(std::size_t requested_bytes) const noexcept override;
  pool_id pool_for(const alloc_request& request, std::size_t rounded_bytes) const noexcept override;
  std::size_t segment_bytes(pool_id pool, std::size_t rounded_bytes) const noexcept override;
  bool should_split(pool_id pool, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept override;
  release_plan on_oom(const grow_context& context) override;

 private:
  options opts_;
  std::vector<pool_traits> pools_;
};

}  // namespace phasealloc
