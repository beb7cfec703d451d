// flat_id_map and id_history against the standard containers, on dense, patterned and random ids.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "phasealloc/trace/flat_id_map.hpp"
#include "phasealloc/trace/id_history.hpp"

namespace phasealloc {
namespace {

TEST(FlatIdMapTest, InsertFindErase) {
  flat_id_map<std::uint64_t> m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.find(0), nullptr);
  EXPECT_FALSE(m.erase(0));
  const auto [v, inserted] = m.try_emplace(7, 70);
  ASSERT_TRUE(inserted);
  EXPECT_EQ(*v, 70U);
  const auto [again, second] = m.try_emplace(7, 71);
  EXPECT_FALSE(second);
  EXPECT_EQ(*again, 70U);
  m.try_emplace(0, 1);
  m.try_emplace(UINT64_MAX, 2);
  EXPECT_EQ(m.size(), 3U);
  EXPECT_EQ(*m.find(0), 1U);
  EXPECT_EQ(*m.find(UINT64_MAX), 2U);
  EXPECT_TRUE(m.erase(7));
  EXPECT_FALSE(m.erase(7));
  EXPECT_FALSE(m.contains(7));
  EXPECT_EQ(m.size(), 2U);
  m.clear();
  EXPECT_TRUE(m.empty());
  EXPECT_FALSE(m.contains(0));
}

// Random inserts and erases over several id shapes, checked against std::unordered_map after each.
TEST(FlatIdMapTest, MatchesUnorderedMap) {
  std::mt19937_64 rng(42);
  const auto shapes = std::vector<std::uint64_t (*)(std::mt19937_64&, std::uint64_t)>{
      [](std::mt19937_64&, std::uint64_t k) { return k % 3000; },                       // dense
      [](std::mt19937_64&, std::uint64_t k) { return (k % 3000) << 32; },               // one home bit pattern
      [](std::mt19937_64&, std::uint64_t k) { return (k % 3000) * 4096; },              // page-aligned
      [](std::mt19937_64& r, std::uint64_t) { return r() % 5000; },                     // random, small
      [](std::mt19937_64& r, std::uint64_t) { return r() | (std::uint64_t{1} << 63); },  // random, wide
  };
  for (const auto shape : shapes) {
    flat_id_map<std::uint64_t> m;
    std::unordered_map<std::uint64_t, std::uint64_t> ref;
    for (std::uint64_t k = 0; k < 40000; ++k) {
      const std::uint64_t id = shape(rng, rng() % 4 == 0 ? k : rng() % 40000);
      if (rng() % 3 == 0) {
        EXPECT_EQ(m.erase(id), ref.erase(id) == 1);
      } else {
        const auto [v, inserted] = m.try_emplace(id, k);
        const auto [it, ref_inserted] = ref.try_emplace(id, k);
        EXPECT_EQ(inserted, ref_inserted);
        EXPECT_EQ(*v, it->second);
      }
      ASSERT_EQ(m.size(), ref.size());
    }
    for (const auto& [id, value] : ref) {
      const std::uint64_t* found = m.find(id);
      ASSERT_NE(found, nullptr) << id;
      EXPECT_EQ(*found, value);
    }
    // Erasing everything leaves nothing reachable.
    for (const auto& [id, value] : ref) EXPECT_TRUE(m.erase(id));
    EXPECT_TRUE(m.empty());
    for (const auto& [id, value] : ref) EXPECT_FALSE(m.contains(id));
  }
}

TEST(FlatIdMapTest, ReserveKeepsEntries) {
  flat_id_map<int> m;
  for (int i = 0; i < 100; ++i) m.try_emplace(static_cast<std::uint64_t>(i) * 17, i);
  m.reserve(10000);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(*m.find(static_cast<std::uint64_t>(i) * 17), i);
  EXPECT_EQ(m.size(), 100U);
}

TEST(IdHistoryTest, IncreasingIdsAndGaps) {
  id_history h;
  for (std::uint64_t id = 0; id < 1000; ++id) EXPECT_TRUE(h.insert(id));
  EXPECT_TRUE(h.insert(5000));  // a gap: a second run
  EXPECT_TRUE(h.insert(5001));
  for (std::uint64_t id = 0; id < 1000; ++id) EXPECT_FALSE(h.insert(id)) << id;
  EXPECT_FALSE(h.insert(5000));
  EXPECT_FALSE(h.insert(5001));
  EXPECT_FALSE(h.contains(1000));
  EXPECT_FALSE(h.contains(4999));
  EXPECT_FALSE(h.contains(5002));
  EXPECT_TRUE(h.insert(3000));  // below the last run, in no run
  EXPECT_FALSE(h.insert(3000));
  EXPECT_TRUE(h.contains(3000));
  EXPECT_TRUE(h.insert(UINT64_MAX));
  EXPECT_FALSE(h.insert(UINT64_MAX));
  EXPECT_TRUE(h.insert(0xffff'ffff'ffff'fffe));
  EXPECT_FALSE(h.insert(0xffff'ffff'ffff'fffe));
}

TEST(IdHistoryTest, MatchesStdSet) {
  std::mt19937_64 rng(7);
  for (int shape = 0; shape < 3; ++shape) {
    id_history h;
    std::set<std::uint64_t> ref;
    std::uint64_t next = 0;
    for (int k = 0; k < 30000; ++k) {
      std::uint64_t id = 0;
      switch (shape) {
        case 0: id = rng() % 8 == 0 ? rng() % (next + 1) : next++; break;        // mostly increasing
        case 1: id = (next += 1 + rng() % 3); break;                              // increasing, gaps
        default: id = rng() % 20000; break;                                       // shuffled
      }
      EXPECT_EQ(h.insert(id), ref.insert(id).second) << id;
      const std::uint64_t probe = rng() % (next + 20000);
      ASSERT_EQ(h.contains(probe), ref.contains(probe)) << probe;
    }
  }
}

}  // namespace
}  // namespace phasealloc
