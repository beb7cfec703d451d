// Multi-threaded stress: several threads allocate, free (their own blocks and blocks handed over
// by other threads), record streams and switch phases on one engine. Run under the thread
// sanitizer in CI. Afterwards the books must be exact and empty.
#include <atomic>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/basic_policy.hpp"

namespace phasealloc {
namespace {

TEST(EngineStressTest, ConcurrentThreadsKeepExactBooks) {
  constexpr int threads = 4;
  constexpr int ops_per_thread = 20'000;
  model_device device(model_device_config{.capacity_bytes = 4 * gib, .virtual_memory = true});
  basic_policy policy(basic_policy_options{.expandable_large = true});
  engine e(device, policy, engine_options{.strict = true, .check_invariants = false});

  std::mutex handoff_mutex;
  std::deque<device_address> handoff;  // blocks one thread allocates and another frees
  std::atomic<std::int64_t> allocs{0}, frees{0};

  const auto worker = [&](int id) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(id) * 7919 + 1);
    std::vector<device_address> mine;
    const stream_id stream = static_cast<stream_id>(id + 1);
    for (int i = 0; i < ops_per_thread; ++i) {
      const unsigned roll = static_cast<unsigned>(rng() % 100);
      if ((roll < 50 && mine.size() < 48) || mine.empty()) {
        const std::size_t bytes = static_cast<std::size_t>(std::exp2(std::uniform_real_distribution<double>(6, 24)(rng)));
        auto r = e.allocate(bytes, stream);
        ASSERT_TRUE(r.has_value()) << format_oom_report(r.error().report);
        ++allocs;
        bool handed = false;
        if (rng() % 4 == 0) {
          std::lock_guard lock(handoff_mutex);
          if (handoff.size() < 32) {
            handoff.push_back(r.value());
            handed = true;
          }
        }
        if (!handed) mine.push_back(r.value());
      } else if (roll < 90) {
        const std::size_t k = rng() % mine.size();
        ASSERT_EQ(e.deallocate(mine[k]), errc::ok);
        mine[k] = mine.back();
        mine.pop_back();
        ++frees;
      } else if (roll < 96) {
        device_address a = 0;
        {
          std::lock_guard lock(handoff_mutex);
          if (!handoff.empty()) {
            a = handoff.front();
            handoff.pop_front();
          }
        }
        if (a != 0) {
          ASSERT_EQ(e.record_stream(a, stream), errc::ok);
          ASSERT_EQ(e.deallocate(a), errc::ok);
          ++frees;
        }
      } else if (roll < 97 && id == 0) {  // the working set stays bounded: 4 x 48 own + 32 handed over
        e.set_phase(rng() % 2 ? "generation" : "training");
      } else if (roll < 98) {
        (void)e.stats();
      } else if (roll < 99 && id == 1) {
        e.empty_cache();
      }
    }
    for (device_address a : mine) {
      ASSERT_EQ(e.deallocate(a), errc::ok);
      ++frees;
    }
  };

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  for (std::thread& t : pool) t.join();
  for (device_address a : handoff) {
    ASSERT_EQ(e.deallocate(a), errc::ok);
    ++frees;
  }

  EXPECT_EQ(allocs.load(), frees.load());
  EXPECT_TRUE(e.check_invariants().empty());
  const device_stats s = e.stats();
  EXPECT_EQ(s.allocated_bytes[stat_type::all].current, 0);
  EXPECT_EQ(s.requested_bytes[stat_type::all].current, 0);
  EXPECT_EQ(s.allocation[stat_type::all].allocated, allocs.load());
  e.empty_cache();
  EXPECT_EQ(e.stats().reserved_bytes[stat_type::all].current, 0);
  EXPECT_EQ(device.mapped_bytes(), 0u);
}

}  // namespace
}  // namespace phasealloc
