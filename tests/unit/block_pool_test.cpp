// The pool index (allocator/src/block_pool.hpp: exact-size bins beside an ordered set) against a
// plain std::set in the order (stream, size, address): seeded random inserts, erases, best fits
// and first fits passing over a block, with sizes that land in the bins (multiples of 512 B up to
// 2 MiB, many equal), in the set (above 2 MiB, or not a multiple of 512 B) and at the border, on
// three streams. Every answer must be the reference's block.
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "block_pool.hpp"
#include "node_recycler.hpp"

namespace phasealloc::detail {
namespace {

struct reference_order {
  bool operator()(const block* a, const block* b) const noexcept {
    if (a->stream != b->stream) return a->stream < b->stream;
    if (a->bytes != b->bytes) return a->bytes < b->bytes;
    return a->addr < b->addr;
  }
};

/// The reference: the first block of (stream, at least bytes), passing over `skip`.
const block* reference_fit(const std::set<block*, reference_order>& ref, stream_id stream, std::size_t bytes,
                           const block* skip) {
  for (const block* b : ref) {
    if (b->stream == stream && b->bytes >= bytes && b != skip) return b;
  }
  return nullptr;
}

std::size_t random_bytes(std::mt19937_64& rng) {
  switch (rng() % 6) {
    case 0: return 512 * (1 + rng() % 4);                       // a few small sizes, many blocks each
    case 1: return 512 * (1 + rng() % size_bins::bin_count);    // any binned size
    case 2: return size_bins::max_bytes + 512 * (rng() % 3);    // the border
    case 3: return 1 + rng() % (4u << 20);                      // any size: most not a multiple of 512
    case 4: return (2u << 20) + 512 * (1 + rng() % 100'000);    // large
    default: return 512 * (1 + rng() % 8) * 1024;               // 512 KiB multiples, across the border
  }
}

void run(std::uint64_t seed, bool ordered_only) {
  node_recycler nodes;
  block_pool pool(&nodes, ordered_only);
  std::set<block*, reference_order> ref;
  std::vector<block> storage(20'000);
  std::vector<block*> spare;
  for (block& b : storage) spare.push_back(&b);
  std::mt19937_64 rng(seed);
  device_address next_addr = 1u << 20;
  std::size_t free_bytes = 0;
  for (std::size_t op = 0; op < 60'000; ++op) {
    const bool grow_phase = (op / 6'000) % 2 == 0;
    const std::uint64_t roll = rng() % 100;
    if (!spare.empty() && (ref.empty() || roll < (grow_phase ? 55u : 35u))) {
      block* b = spare.back();
      spare.pop_back();
      *b = block{};
      b->bytes = random_bytes(rng);
      b->stream = rng() % 3;
      // Addresses mostly rise (a device's), sometimes come back low (equal sizes in any address order).
      b->addr = rng() % 8 == 0 ? (rng() % 4096) * 512 : (next_addr += 512 * (1 + rng() % 64));
      while (ref.count(b) != 0) b->addr += 1;
      pool.insert(b);
      ref.insert(b);
      free_bytes += b->bytes;
    } else if (!ref.empty() && roll < 80) {
      auto it = ref.begin();
      std::advance(it, static_cast<long>(rng() % ref.size()));
      block* b = *it;
      ASSERT_TRUE(pool.contains(b)) << "op " << op;
      pool.erase(b);
      ref.erase(it);
      EXPECT_FALSE(pool.contains(b)) << "op " << op;
      free_bytes -= b->bytes;
      spare.push_back(b);
    } else {
      const stream_id stream = rng() % 3;
      const std::size_t bytes = rng() % 4 == 0 ? 0 : random_bytes(rng);
      const block* skip = nullptr;
      if (!ref.empty() && rng() % 2 == 0) {
        auto it = ref.begin();
        std::advance(it, static_cast<long>(rng() % ref.size()));
        skip = *it;
      }
      const block* want = reference_fit(ref, stream, bytes, skip);
      ASSERT_EQ(pool.first_fit(stream, bytes, skip), want) << "op " << op << ": first fit of " << bytes << " on "
                                                            << stream;
      const block* best = pool.best_fit(stream, bytes, [](const block*) { return true; });
      ASSERT_EQ(best, reference_fit(ref, stream, bytes, nullptr)) << "op " << op;
      const block* refused = pool.best_fit(stream, bytes, [](const block*) { return false; });
      EXPECT_EQ(refused, nullptr);
    }
    ASSERT_EQ(pool.size(), ref.size());
    ASSERT_EQ(pool.free_bytes(), free_bytes);
    if (op % 997 == 0) {
      std::size_t largest = 0;
      std::size_t seen = 0;
      for (const block* b : ref) largest = std::max(largest, b->bytes);
      pool.for_each([&](const block* b) {
        ++seen;
        EXPECT_EQ(ref.count(const_cast<block*>(b)), 1u);
      });
      EXPECT_EQ(seen, ref.size());
      EXPECT_EQ(pool.largest_bytes(), largest) << "op " << op;
    }
  }
}

TEST(block_pool, answers_as_an_ordered_set_with_bins) { run(0x5eed, false); }
TEST(block_pool, answers_as_an_ordered_set_another_seed) { run(42, false); }
TEST(block_pool, ordered_only_answers_the_same) { run(7, true); }

TEST(block_pool, lookups_and_versions_count) {
  node_recycler nodes;
  block_pool pool(&nodes, false);
  block a{};
  a.addr = 4096;
  a.bytes = 1024;
  const std::uint64_t v0 = pool.version();
  pool.insert(&a);
  EXPECT_NE(pool.version(), v0);
  EXPECT_EQ(pool.best_fit(0, 1000, [](const block*) { return true; }), &a);
  EXPECT_EQ(pool.best_fit(0, 1025, [](const block*) { return true; }), nullptr);
  EXPECT_EQ(pool.lookups(), 2u);
  EXPECT_EQ(pool.first_fit(0, 512, &a), nullptr);  // passing over its only block
  EXPECT_EQ(pool.lookups(), 2u);                   // first_fit is not a lookup
  EXPECT_EQ(a.free_since, 0u);
  pool.erase(&a);
  EXPECT_FALSE(pool.contains(&a));
  EXPECT_EQ(pool.size(), 0u);
}

}  // namespace
}  // namespace phasealloc::detail
