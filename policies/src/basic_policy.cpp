#include "phasealloc/policies/basic_policy.hpp"

#include <fmt/format.h>

#include "phasealloc/conf.hpp"

namespace phasealloc {
namespace {
constexpr pool_id small_pool = 0;
constexpr pool_id large_pool = 1;
constexpr std::size_t min_block_bytes = 512;
}  // namespace

basic_policy::basic_policy(options opts) : opts_(opts) {
  pools_.push_back(pool_traits{"small", true, false, 0, false});
  pools_.push_back(pool_traits{"large", false, opts_.expandable_large, opts_.large_round_bytes, false});
}

result<std::unique_ptr<policy>, std::string> basic_policy::create(std::string_view conf) {
  auto entries = parse_conf(conf);
  if (!entries) return "basic: " + entries.error();
  conf_reader reader("basic", std::move(entries).value());
  options o;
  if (auto v = reader.get_bytes("small_limit")) o.small_limit_bytes = *v;
  if (auto v = reader.get_bytes("small_segment")) o.small_segment_bytes = *v;
  if (auto v = reader.get_bytes("large_round")) o.large_round_bytes = *v;
  if (auto v = reader.get_bool("expandable_large")) o.expandable_large = *v;
  if (o.small_segment_bytes < o.small_limit_bytes) reader.fail("small_segment", "must be at least small_limit");
  if (o.large_round_bytes == 0) reader.fail("large_round", "must be positive");
  if (auto error = reader.finish()) return *error;
  return std::unique_ptr<policy>(std::make_unique<basic_policy>(o));
}

std::string basic_policy::spec() const {
  return fmt::format("basic:small_limit:{},small_segment:{},large_round:{},expandable_large:{}",
                     opts_.small_limit_bytes, opts_.small_segment_bytes, opts_.large_round_bytes,
                     opts_.expandable_large);
}

std::size_t basic_policy::round_bytes(std::size_t requested_bytes) const noexcept {
  return requested_bytes < min_block_bytes ? min_block_bytes : round_up(requested_bytes, min_block_bytes);
}

pool_id basic_policy::pool_for(const alloc_request& /*request*/, std::size_t rounded_bytes) const noexcept {
  return rounded_bytes <= opts_.small_limit_bytes ? small_pool : large_pool;
}

std::size_t basic_policy::segment_bytes(pool_id pool, std::size_t rounded_bytes) const noexcept {
  return pool == small_pool ? opts_.small_segment_bytes : round_up(rounded_bytes, opts_.large_round_bytes);
}

bool basic_policy::should_split(pool_id pool, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept {
  const std::size_t remaining = block_bytes - rounded_bytes;
  // An expandable pool's remainder merges with the pages mapped after it, so any remainder is kept.
  return (pool == small_pool || pools_[pool].expandable) ? remaining >= min_block_bytes : remaining > mib;
}

release_plan basic_policy::on_oom(const grow_context& /*context*/) {
  release_step all;
  all.synchronize = true;
  return {all};
}

}  // namespace phasealloc
