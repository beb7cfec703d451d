// The deferred merge (allocator/src/deferred_free.cpp) must be invisible: two engines, one with
// defer_frees on and one with it off, run the same seeded operations and must hand out the same
// addresses, fail the same allocations and show the same levels after every operation, and the
// same snapshot, stats (accumulated sums included) and phase books at every comparison point.
// Comparisons that settle the deferred block (snapshot, stats) are made every few operations only,
// so the deferred state also lives across operations. Both engines run the invariant checker.
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc {
namespace {

struct side {
  side(const std::string& spec, bool virtual_memory, bool defer)
      : dev(model_device_config{.capacity_bytes = 512 * mib, .virtual_memory = virtual_memory,
                       .events_complete_immediately = true}),
        pol(make_policy(spec).value()),
        eng(dev, *pol, engine_options{.strict = true, .check_invariants = true, .defer_frees = defer}) {}
  model_device dev;
  std::unique_ptr<policy> pol;
  engine eng;
};

bool same_phases(const std::vector<phase_stats>& a, const std::vector<phase_stats>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const phase_stats& x = a[i];
    const phase_stats& y = b[i];
    if (x.name != y.name || x.intervals != y.intervals || x.peak_allocated_bytes != y.peak_allocated_bytes ||
        x.peak_reserved_bytes != y.peak_reserved_bytes || x.peak_active_bytes != y.peak_active_bytes ||
        x.peak_requested_bytes != y.peak_requested_bytes ||
        x.reserved_unallocated_at_peak_bytes != y.reserved_unallocated_at_peak_bytes ||
        x.largest_free_block_at_peak_bytes != y.largest_free_block_at_peak_bytes || x.num_allocs != y.num_allocs ||
        x.num_frees != y.num_frees || x.num_device_alloc != y.num_device_alloc ||
        x.num_device_free != y.num_device_free || x.num_device_map != y.num_device_map ||
        x.num_device_unmap != y.num_device_unmap || x.num_alloc_retries != y.num_alloc_retries ||
        x.num_ooms != y.num_ooms || x.released_bytes != y.released_bytes) {
      return false;
    }
  }
  return true;
}

std::string describe(const snapshot& s) {
  std::string out;
  for (const snapshot_segment& seg : s.segments) {
    out += fmt::format("segment {:#x} +{} mapped {} pool {}:", seg.addr, seg.bytes, seg.mapped_bytes, seg.pool);
    for (const snapshot_block& b : seg.blocks) {
      out += fmt::format(" [{:#x} +{} req {} state {}]", b.addr, b.bytes, b.requested_bytes, static_cast<int>(b.state));
    }
    out += "\n";
  }
  return out;
}

void compare_books(side& deferred, side& eager, std::size_t op) {
  ASSERT_EQ(describe(deferred.eng.take_snapshot()), describe(eager.eng.take_snapshot())) << "op " << op;
  ASSERT_EQ(to_memory_stats(deferred.eng.stats()), to_memory_stats(eager.eng.stats())) << "op " << op;
  ASSERT_TRUE(same_phases(deferred.eng.phases(), eager.eng.phases())) << "op " << op;
}

void run(const std::string& spec, bool virtual_memory, std::uint64_t seed, std::size_t ops) {
  side deferred(spec, virtual_memory, true);
  side eager(spec, virtual_memory, false);
  std::mt19937_64 rng(seed);
  std::vector<std::pair<device_address, std::size_t>> live;
  // A few hot sizes (taken back at once, the deferred path) and random ones up to 64 MiB.
  const std::size_t hot[] = {512, 4096, 65536, 1 << 20, 3 << 20, 20 << 20};
  const char* phases[] = {"generation", "training", "optimizer"};
  for (std::size_t op = 0; op < ops; ++op) {
    const unsigned pick = static_cast<unsigned>(rng() % 1000);
    if (pick < 450 || live.empty()) {
      const std::size_t bytes = rng() % 3 != 0 ? hot[rng() % std::size(hot)] : (std::size_t{1} << (rng() % 27)) + rng() % 4096;
      const stream_id stream = rng() % 8 == 0 ? 7 : 0;
      auto a = deferred.eng.allocate(bytes, stream);
      auto b = eager.eng.allocate(bytes, stream);
      ASSERT_EQ(a.has_value(), b.has_value()) << "op " << op << ": allocate(" << bytes << ")";
      if (a) {
        ASSERT_EQ(a.value(), b.value()) << "op " << op << ": allocate(" << bytes << ")";
        live.emplace_back(a.value(), bytes);
        // Free it again at once half of the time: the free-then-allocate pair.
        if (rng() % 2 == 0) {
          ASSERT_EQ(deferred.eng.deallocate(a.value(), bytes), eager.eng.deallocate(b.value(), bytes));
          live.pop_back();
        }
      }
    } else if (pick < 900) {
      const std::size_t i = rng() % live.size();
      const auto [addr, bytes] = live[i];
      live[i] = live.back();
      live.pop_back();
      ASSERT_EQ(deferred.eng.deallocate(addr, bytes), eager.eng.deallocate(addr, bytes)) << "op " << op;
    } else if (pick < 940) {
      const auto [addr, bytes] = live[rng() % live.size()];
      ASSERT_EQ(deferred.eng.record_stream(addr, 3), eager.eng.record_stream(addr, 3));
    } else if (pick < 975) {
      const char* name = phases[rng() % std::size(phases)];
      deferred.eng.set_phase(name);
      eager.eng.set_phase(name);
      // What a transition released (stale runs: free_epoch) shows in the books.
      if (rng() % 4 == 0) compare_books(deferred, eager, op);
    } else if (pick < 985) {
      deferred.eng.empty_cache();
      eager.eng.empty_cache();
    } else if (pick < 990) {
      deferred.eng.reset_peak_stats();
      eager.eng.reset_peak_stats();
    } else {
      compare_books(deferred, eager, op);
    }
    const memory_levels x = deferred.eng.levels();
    const memory_levels y = eager.eng.levels();
    ASSERT_EQ(x.allocated_bytes, y.allocated_bytes) << "op " << op;
    ASSERT_EQ(x.reserved_bytes, y.reserved_bytes) << "op " << op;
    ASSERT_EQ(x.active_bytes, y.active_bytes) << "op " << op;
    ASSERT_EQ(x.requested_bytes, y.requested_bytes) << "op " << op;
  }
  compare_books(deferred, eager, ops);
}

class deferred_free_test : public ::testing::TestWithParam<std::pair<const char*, bool>> {};

TEST_P(deferred_free_test, same_decisions_and_books_as_merging_at_once) {
  const auto [spec, virtual_memory] = GetParam();
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(fmt::format("{} seed {}", spec, seed));
    run(spec, virtual_memory, seed, 20'000);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(policies, deferred_free_test,
                         ::testing::Values(std::pair{"phasealloc", true}, std::pair{"pytorch", false},
                                           std::pair{"pytorch:max_split_size_mb:20", false},
                                           std::pair{"pytorch:expandable_segments:True", true},
                                           std::pair{"pytorch:garbage_collection_threshold:0.5", false}));

TEST(deferred_free, a_block_taken_back_books_both_calls) {
  // Free then allocate the same size: the deferred block comes back, the pair's sums are batched
  // and must be folded into what stats() shows.
  side s("phasealloc", true, true);
  auto first = s.eng.allocate(512, 0);
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(s.eng.deallocate(first.value(), 512), errc::ok);
  auto again = s.eng.allocate(512, 0);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again.value(), first.value());
  const device_stats st = s.eng.stats();
  EXPECT_EQ(st.allocation[stat_type::all].allocated, 2);  // the batched pair folded in
  EXPECT_EQ(st.allocation[stat_type::all].freed, 1);
  EXPECT_EQ(st.allocation[stat_type::all].current, 1);
  EXPECT_EQ(st.allocated_bytes[stat_type::small_pool].allocated, 1024);
}

}  // namespace
}  // namespace phasealloc
