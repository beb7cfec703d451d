// The live table (allocator/src/live_table.hpp) against std::unordered_map: seeded random inserts,
// finds and erases, with addresses that collide in the table's home slots (multiples of a large
// power of two) and addresses spread like a device's, through several doublings.
#include <random>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "live_table.hpp"

namespace phasealloc::detail {
namespace {

block* fake_block(std::uintptr_t n) { return reinterpret_cast<block*>(n * 16 + 16); }

void run(std::uint64_t seed, device_address stride) {
  live_table table;
  std::unordered_map<device_address, block*> model;
  std::vector<device_address> keys;
  std::mt19937_64 rng(seed);
  for (std::size_t op = 0; op < 200'000; ++op) {
    const bool grow_phase = (op / 20'000) % 2 == 0;  // the live set grows, then shrinks, then grows
    if (keys.empty() || rng() % 100 < (grow_phase ? 60u : 40u)) {
      const device_address addr = (rng() % 100'000 + 1) * stride;
      if (model.count(addr) != 0) continue;
      block* b = fake_block(op);
      table.emplace(addr, b);
      model.emplace(addr, b);
      keys.push_back(addr);
    } else {
      const std::size_t i = rng() % keys.size();
      const device_address addr = keys[i];
      keys[i] = keys.back();
      keys.pop_back();
      ASSERT_EQ(table.erase(addr), model.at(addr)) << "op " << op;
      model.erase(addr);
      ASSERT_EQ(table.find(addr), nullptr) << "op " << op;
    }
    if (op % 997 == 0) {
      for (const auto& [addr, b] : model) ASSERT_EQ(table.find(addr), b) << "op " << op;
    }
    ASSERT_EQ(table.size(), model.size());
    const device_address absent = (rng() % 100'000 + 100'001) * stride;
    ASSERT_EQ(table.find(absent), nullptr);
    ASSERT_EQ(table.erase(absent), nullptr);
  }
  for (const auto& [addr, b] : model) ASSERT_EQ(table.find(addr), b);
}

TEST(live_table, matches_a_map_with_device_like_addresses) { run(1, 512); }
TEST(live_table, matches_a_map_with_colliding_addresses) { run(2, device_address{1} << 40); }
TEST(live_table, matches_a_map_with_page_addresses) { run(3, device_address{2} << 20); }

TEST(live_table, address_zero_is_refused) {
  live_table table;
  EXPECT_DEATH(table.emplace(0, fake_block(1)), "address 0");
}

TEST(live_table, a_second_insert_of_an_address_is_refused) {
  live_table table;
  table.emplace(4096, fake_block(1));
  EXPECT_DEATH(table.emplace(4096, fake_block(2)), "already live");
}

}  // namespace
}  // namespace phasealloc::detail
