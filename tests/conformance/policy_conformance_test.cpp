// The policy conformance suite: what every registered policy, with each of its keys set away from
// its default, must honour on the engine, whatever its algorithm:
//   - an allocation is a block or out of memory (with a report), never another error;
//   - blocks never overlap, each lies in mapped device memory, and stays mapped through every
//     release (phase transitions, empty_cache, growth's and OOM's release plans): a release
//     returns only free pages;
//   - the books balance: allocated bytes hold at least what was requested, reserved bytes equal
//     the device's own count of the memory it backs, and with nothing allocated empty_cache gives
//     every byte back;
//   - a request the device cannot hold is out of memory, and the engine goes on after it.
// The engine's own invariant checker runs after every operation as well. A key a policy accepts
// that no spec below sets fails EveryKeyOfEveryPolicyIsExercised: a new key joins the suite.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc {
namespace {

/// Each registered policy at its defaults, then each key away from its default (keys that change
/// nothing in a replay, accepted so a PYTORCH_CUDA_ALLOC_CONF pastes unchanged, in one spec).
const std::vector<std::string>& conformance_specs() {
  static const std::vector<std::string> specs{
      "basic",
      "basic:small_limit:2MiB",
      "basic:small_segment:4MiB",
      "basic:large_round:4MiB",
      "basic:expandable_large:true",
      "pytorch",
      "pytorch:expandable_segments:True",
      "pytorch:large_segment_size_mb:40",
      "pytorch:max_split_size_mb:64",
      "pytorch:max_non_split_rounding_mb:64",
      "pytorch:roundup_power2_divisions:4",
      "pytorch:garbage_collection_threshold:0.5",
      "pytorch:block_order:address",
      "pytorch:per_process_memory_fraction:0.75",
      "pytorch:release_lock_on_cudamalloc:True,release_lock_on_hipmalloc:True,pinned_use_cuda_host_register:True,"
      "pinned_use_hip_host_register:True,pinned_use_background_threads:True,graph_capture_record_stream_reuse:True,"
      "pinned_num_register_threads:4,backend:native",
      "phasealloc",
      "phasealloc:release:none",
      "phasealloc:release:all",
      "phasealloc:release_threshold:0",
      "phasealloc:reclaim:false",
      "phasealloc:reclaim_min_run:2MiB",
      "phasealloc:page:4MiB",
      "phasealloc:grow:2MiB",
      "phasealloc:grow_whole:true",
      "phasealloc:small_grow:0",
      "phasealloc:map_ahead:false",
      "phasealloc:need_from_entry:false",
      "phasealloc:keep_for_step:true",
      "phasealloc:lifetime:true",
      "phasealloc:phase_pools:true",
      "phasealloc:phase_pools:true,rollout_phases:[generation]",
      "phasealloc:pin_tags:[7]",
      "phasealloc:pin_sizes:[3145728]",
      "phasealloc:memory_fraction:0.75",
  };
  return specs;
}

/// The keys `policy_name` accepts, from the error an unknown key gets (it lists the valid ones).
std::vector<std::string> accepted_keys(std::string_view policy_name) {
  const std::string probe = std::string(policy_name) + ":no_such_key_for_the_suite:1";
  auto made = make_policy(probe);
  if (made) return {};
  const std::string& error = made.error();
  const std::string marker = "valid keys: ";
  const std::size_t at = error.find(marker);
  if (at == std::string::npos) return {};
  std::vector<std::string> keys;
  std::string rest = error.substr(at + marker.size());
  for (std::size_t start = 0; start < rest.size();) {
    const std::size_t comma = rest.find(", ", start);
    keys.push_back(rest.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 2;
  }
  return keys;
}

TEST(PolicyConformance, EveryKeyOfEveryPolicyIsExercised) {
  for (const policy_entry& entry : policy_names()) {
    const std::vector<std::string> keys = accepted_keys(entry.name);
    bool at_defaults = false;
    std::set<std::string> set_keys;
    for (const std::string& spec : conformance_specs()) {
      const auto [name, conf] = split_policy_spec(spec);
      if (name != entry.name) continue;
      if (conf.empty()) at_defaults = true;
      for (const std::string& key : keys) {
        if (conf.starts_with(key + ":") || conf.find("," + key + ":") != std::string_view::npos) set_keys.insert(key);
      }
    }
    EXPECT_TRUE(at_defaults) << "policy '" << entry.name << "' is not in the suite at its defaults";
    for (const std::string& key : keys) {
      EXPECT_TRUE(set_keys.count(key)) << "policy '" << entry.name << "': key '" << key << "' is set by no spec";
    }
  }
}

bool wants_virtual_memory(const policy& p) {
  for (const pool_traits& t : p.pools()) {
    if (t.expandable) return true;
  }
  return false;
}

class PolicyConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr std::size_t capacity_bytes = 1 * gib;
  static constexpr std::size_t granularity_bytes = 2 * mib;

  void SetUp() override {
    auto made = make_policy(GetParam());
    ASSERT_TRUE(made.has_value()) << made.error();
    policy_ = std::move(made).value();
    device_ = std::make_unique<model_device>(model_device_config{
        .capacity_bytes = capacity_bytes, .granularity_bytes = granularity_bytes, .virtual_memory = wants_virtual_memory(*policy_)});
    engine_ = std::make_unique<engine>(*device_, *policy_, engine_options{.strict = true, .check_invariants = true});
  }

  /// Every live block is in mapped memory and none overlaps another (by the bytes it was asked for).
  void expect_live_blocks_sound(const char* after) {
    device_address end_of_previous = 0;
    for (const auto& [addr, bytes] : live_) {
      EXPECT_GE(addr, end_of_previous) << "block " << addr << " overlaps the one before it, after " << after;
      const device_address lo = addr / granularity_bytes * granularity_bytes;
      const device_address hi = (addr + std::max<std::size_t>(bytes, 1) + granularity_bytes - 1) / granularity_bytes *
                                granularity_bytes;
      EXPECT_TRUE(device_->is_mapped(lo, hi - lo))
          << "live block " << addr << " (" << bytes << " bytes) is not mapped after " << after;
      end_of_previous = addr + bytes;
    }
    EXPECT_EQ(engine_->levels().reserved_bytes, device_->mapped_bytes()) << "after " << after;
    std::size_t requested = 0;
    for (const auto& [addr, bytes] : live_) requested += bytes;
    EXPECT_GE(engine_->levels().allocated_bytes, requested) << "after " << after;
    EXPECT_LE(engine_->levels().reserved_bytes, capacity_bytes) << "after " << after;
  }

  void free_at(std::size_t k) {
    auto it = std::next(live_.begin(), static_cast<std::ptrdiff_t>(k));
    ASSERT_EQ(engine_->deallocate(it->first, it->second), errc::ok);
    live_.erase(it);
  }

  std::unique_ptr<policy> policy_;
  std::unique_ptr<model_device> device_;
  std::unique_ptr<engine> engine_;
  std::map<device_address, std::size_t> live_;  ///< address -> requested bytes
};

TEST_P(PolicyConformanceTest, BlocksNeverOverlapReleasesReturnOnlyFreePagesAndTheBooksBalance) {
  std::mt19937_64 rng(std::hash<std::string>{}(GetParam()));
  std::uniform_real_distribution<double> log_size(0.0, 26.0);  // 1 B .. 64 MiB, log-uniform
  const char* phases[] = {"generation", "inference", "training", "optimizer"};
  const std::uint32_t tags[] = {0, 0, 0, 7, named_tag_base, named_tag_base + 1};
  std::size_t live_bytes = 0;
  int phase = 0;
  for (int op = 0; op < 3000; ++op) {
    const unsigned what = static_cast<unsigned>(rng() % 100);
    if (what < 55 || live_.empty()) {
      std::size_t bytes = static_cast<std::size_t>(std::exp2(log_size(rng)));
      if (rng() % 10 == 0) bytes = 3 * mib;  // pin_sizes' size
      const stream_id stream = rng() % 4 == 0 ? 2 : 0;
      auto r = engine_->allocate(bytes, stream, tags[rng() % std::size(tags)]);
      if (r) {
        ASSERT_TRUE(live_.emplace(r.value(), bytes).second) << "address " << r.value() << " handed out twice";
        live_bytes += bytes;
        if (rng() % 8 == 0) {
          ASSERT_EQ(engine_->record_stream(r.value(), stream == 0 ? 3 : 0), errc::ok);
        }
      } else {
        ASSERT_EQ(r.error().code, errc::out_of_memory) << "an allocation of " << bytes << " bytes";
        EXPECT_EQ(r.error().report.requested_bytes, bytes);
      }
      expect_live_blocks_sound("an allocation");
    } else if (what < 90 || live_bytes > capacity_bytes / 2) {
      const std::size_t k = rng() % live_.size();
      live_bytes -= std::next(live_.begin(), static_cast<std::ptrdiff_t>(k))->second;
      free_at(k);
    } else if (what < 97) {
      phase = (phase + 1) % 4;
      engine_->set_phase(phases[phase]);
      expect_live_blocks_sound("a phase transition");
    } else {
      engine_->empty_cache();
      expect_live_blocks_sound("empty_cache");
    }
  }
  // A request the device cannot hold is out of memory, and the engine goes on.
  auto too_big = engine_->allocate(capacity_bytes + 1, 0);
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.error().code, errc::out_of_memory);
  expect_live_blocks_sound("an impossible request");
  while (!live_.empty()) free_at(live_.size() - 1);
  engine_->empty_cache();
  EXPECT_EQ(engine_->levels().allocated_bytes, 0u);
  // With nothing allocated, empty_cache keeps only what pinned pools hold (policy.hpp,
  // on_empty_cache), and a release that includes them gives every byte back.
  std::set<std::string> pinned_pools;
  for (const pool_traits& t : policy_->pools()) {
    if (t.pinned) pinned_pools.insert(t.name);
  }
  std::size_t pinned_bytes = 0;
  for (const snapshot_segment& seg : engine_->take_snapshot().segments) {
    if (pinned_pools.count(seg.pool) != 0) pinned_bytes += seg.mapped_bytes;
  }
  EXPECT_EQ(engine_->levels().reserved_bytes, pinned_bytes) << "empty_cache with nothing allocated kept cached memory";
  release_step everything;
  everything.include_pinned = true;
  everything.synchronize = true;
  engine_->release(release_plan{everything});
  EXPECT_EQ(engine_->levels().reserved_bytes, 0u);
  EXPECT_EQ(device_->mapped_bytes(), 0u);
  EXPECT_TRUE(engine_->check_invariants().empty());
  EXPECT_EQ(engine_->stats().allocated_bytes[stat_type::all].current, 0);
}

TEST_P(PolicyConformanceTest, FillingTheDeviceEndsInOutOfMemoryAndFreeingMakesRoomAgain) {
  std::vector<std::pair<device_address, std::size_t>> blocks;
  for (;;) {
    auto r = engine_->allocate(48 * mib + 4096, 0);
    if (!r) {
      ASSERT_EQ(r.error().code, errc::out_of_memory);
      break;
    }
    blocks.emplace_back(r.value(), 48 * mib + 4096);
    ASSERT_LT(blocks.size(), 64u) << "a 1 GiB device held more than 3 GiB";
  }
  ASSERT_FALSE(blocks.empty());
  EXPECT_GE(blocks.size() * (48 * mib + 4096), capacity_bytes * policy_->memory_fraction() / 2)
      << "ran out of memory with less than half the device in use";
  for (const auto& [addr, bytes] : blocks) live_.emplace(addr, bytes);
  expect_live_blocks_sound("running out of memory");
  free_at(0);
  auto again = engine_->allocate(48 * mib + 4096, 0);
  ASSERT_TRUE(again.has_value()) << "no room after a free of the same size";
  live_.emplace(again.value(), 48 * mib + 4096);
  expect_live_blocks_sound("a free and an allocation");
}

std::string spec_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string out;
  for (const char c : info.param) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PolicyConformanceTest, ::testing::ValuesIn(conformance_specs()), spec_name);

}  // namespace
}  // namespace phasealloc
