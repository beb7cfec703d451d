// Property test: the engine, under every policy, driven with sizes and memory fractions
// at their extremes, answers with values (a block or out of memory) and never aborts; its books
// stay sound after every operation (check_invariants is on).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc {
namespace {

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

std::unique_ptr<policy> policy_for(const std::string& spec) {
  auto made = make_policy(spec);
  EXPECT_TRUE(made.has_value()) << spec;
  return std::move(made).value();
}

bool wants_virtual_memory(const policy& p) {
  for (const pool_traits& t : p.pools()) {
    if (t.expandable) return true;
  }
  return false;
}

/// Sizes at the edges for a device of `capacity` bytes, then random ones up to twice the capacity.
std::vector<std::size_t> extreme_sizes(std::size_t capacity, std::mt19937_64& rng) {
  std::vector<std::size_t> sizes{0,
                                 1,
                                 511,
                                 512,
                                 capacity / 2,
                                 capacity - 1,
                                 capacity,
                                 capacity + 1,
                                 size_max / 4,
                                 size_max / 4 + 1,
                                 size_max / 2,
                                 std::size_t{1} << 63,
                                 size_max - 4095,
                                 size_max - 1,
                                 size_max};
  std::uniform_int_distribution<std::size_t> up_to_twice(0, capacity * 2);
  std::uniform_int_distribution<int> shift(0, 63);
  for (int i = 0; i < 40; ++i) sizes.push_back(up_to_twice(rng));
  for (int i = 0; i < 20; ++i) sizes.push_back(std::size_t{1} << shift(rng));
  std::shuffle(sizes.begin(), sizes.end(), rng);
  return sizes;
}

const std::vector<std::string>& specs() {
  static const std::vector<std::string> s{"basic",
                                          "pytorch",
                                          "pytorch:expandable_segments:True",
                                          "pytorch:max_split_size_mb:64,roundup_power2_divisions:4",
                                          "pytorch:garbage_collection_threshold:0.5",
                                          "phasealloc",
                                          "phasealloc:release:all",
                                          "phasealloc:release:none,map_ahead:false"};
  return s;
}

TEST(EngineExtremes, EverySizeUnderEveryPolicyIsABlockOrOutOfMemory) {
  std::mt19937_64 rng(17);
  for (const std::size_t capacity : {std::size_t{64} * mib, std::size_t{80} * gib, std::size_t{1} << 50}) {
    for (const std::string& spec : specs()) {
      SCOPED_TRACE(spec + " on " + std::to_string(capacity) + " bytes");
      std::unique_ptr<policy> pol = policy_for(spec);
      model_device dev(model_device_config{.capacity_bytes = capacity, .virtual_memory = wants_virtual_memory(*pol)});
      engine eng(dev, *pol, engine_options{.strict = true, .check_invariants = true});
      std::vector<std::pair<device_address, std::size_t>> live;
      for (const std::size_t bytes : extreme_sizes(capacity, rng)) {
        auto r = eng.allocate(bytes, 0);
        if (r) {
          EXPECT_LE(bytes, capacity) << "a block bigger than the device";
          live.emplace_back(r.value(), bytes);
        } else {
          EXPECT_EQ(r.error().code, errc::out_of_memory) << bytes;
          EXPECT_EQ(r.error().report.requested_bytes, bytes);
          EXPECT_FALSE(format_oom_report(r.error().report).empty());
        }
        EXPECT_LE(eng.levels().reserved_bytes, capacity);
        if (!live.empty() && rng() % 3 == 0) {  // free one at random now and then
          const std::size_t k = rng() % live.size();
          EXPECT_EQ(eng.deallocate(live[k].first, live[k].second), errc::ok);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
      for (const auto& [addr, bytes] : live) EXPECT_EQ(eng.deallocate(addr, bytes), errc::ok);
      eng.empty_cache();
      EXPECT_EQ(eng.levels().allocated_bytes, 0u);
      EXPECT_TRUE(eng.check_invariants().empty());
      EXPECT_GT(eng.stats().num_ooms, 0) << "the sizes above the capacity must have run out of memory";
    }
  }
}

TEST(EngineExtremes, ARequestAboveTheCapacityIsOutOfMemoryWithTheRequestInTheReport) {
  std::unique_ptr<policy> pol = policy_for("pytorch");
  model_device dev(model_device_config{.capacity_bytes = 256 * mib});
  engine eng(dev, *pol, engine_options{.strict = true, .check_invariants = true});
  auto r = eng.allocate(size_max - 100, 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, errc::out_of_memory);
  EXPECT_EQ(r.error().report.requested_bytes, size_max - 100);
  EXPECT_EQ(r.error().report.capacity_bytes, 256 * mib);
  EXPECT_EQ(eng.stats().num_ooms, 1);
  EXPECT_EQ(eng.stats().num_device_alloc, 0) << "the device is not asked for an impossible request";
  auto ok = eng.allocate(mib, 0);
  ASSERT_TRUE(ok) << "the engine goes on after an impossible request";
  EXPECT_EQ(eng.deallocate(ok.value(), mib), errc::ok);
}

TEST(EngineExtremes, MemoryLimitOfAFraction) {
  constexpr std::size_t capacity = 80 * gib;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const double bad : {nan, -nan, inf, -inf, 0.0, -0.0, -0.5, 1.0000001, 2.0, 1e-300, 1e-11,
                           std::numeric_limits<double>::denorm_min()}) {
    auto limit = memory_limit_bytes(bad, capacity);
    EXPECT_FALSE(limit) << bad;
  }
  EXPECT_EQ(memory_limit_bytes(1e-11, capacity).error(),
            "memory fraction 1e-11 of a 85899345920-byte device is less than one byte (the smallest fraction of this "
            "device is 1.16e-11)");
  EXPECT_NE(memory_limit_bytes(nan, capacity).error().find("not in (0, 1]"), std::string::npos);
  EXPECT_EQ(memory_limit_bytes(1.0, capacity).value(), 0u) << "1.0 is no limit";
  EXPECT_EQ(memory_limit_bytes(0.5, capacity).value(), capacity / 2);
  EXPECT_EQ(memory_limit_bytes(1.0 / static_cast<double>(capacity), capacity).value(), 1u);
  EXPECT_EQ(memory_limit_bytes(0.999999, std::size_t{1} << 50).value(),
            static_cast<std::size_t>(0.999999 * static_cast<double>(std::size_t{1} << 50)));
}

TEST(EngineExtremes, AFractionThatRoundsToNothingIsALimitOfOneByteNotNoLimit) {
  for (const std::string spec : {"phasealloc:memory_fraction:1e-11", "pytorch:per_process_memory_fraction:1e-11",
                                 "phasealloc:memory_fraction:2e-11"}) {
    SCOPED_TRACE(spec);
    std::unique_ptr<policy> pol = policy_for(spec);
    model_device dev(model_device_config{.capacity_bytes = 80 * gib, .virtual_memory = wants_virtual_memory(*pol)});
    engine eng(dev, *pol, engine_options{.strict = true, .check_invariants = true});
    EXPECT_EQ(eng.limit_bytes(), 1u);
    auto r = eng.allocate(70 * gib, 0);
    ASSERT_FALSE(r) << "a 70 GiB allocation under a limit of one byte";
    EXPECT_EQ(r.error().code, errc::out_of_memory);
    EXPECT_EQ(r.error().report.limit_bytes, 1u);
    EXPECT_FALSE(eng.allocate(512, 0)) << "not even the smallest block fits";
  }
}

TEST(EngineExtremes, NonFiniteFractionsAreRefusedWhenTheSpecIsParsed) {
  for (const std::string spec : {"phasealloc:memory_fraction:nan", "phasealloc:memory_fraction:inf",
                                 "phasealloc:memory_fraction:-nan", "pytorch:per_process_memory_fraction:nan",
                                 "pytorch:garbage_collection_threshold:nan"}) {
    auto made = make_policy(spec);
    ASSERT_FALSE(made) << spec;
    EXPECT_NE(made.error().find("is not a finite number"), std::string::npos) << made.error();
  }
}

}  // namespace
}  // namespace phasealloc
