// Scenario test (mimalloc's test-stress in spirit): seeded random operation sequences against a
// simple reference model of what must be true. The engine runs its invariant checker after every
// operation; this test checks, after every operation, that the engine's books equal the model's:
// exact allocated / requested bytes and counts, reserved bytes equal to what the device has
// mapped, no two live blocks overlap, every live block lies in mapped memory. OOMs are provoked on
// purpose (a 256 MiB device, requests up to 64 MiB) and must be genuine: the device could not give
// what the engine asked for, after the policy's release.
//
// Do not use this as a benchmark. PHASEALLOC_SCENARIO_OPS sets the operations per configuration
// (default 1,000,000; the sanitizer runs use fewer).
#include <cstdlib>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/basic_policy.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc {
namespace {

/// Whether the device has memory behind every byte of [addr, addr+bytes) (granule-aligned query).
bool mapped(const model_device& d, device_address addr, std::size_t bytes) {
  const std::size_t g = d.caps().granularity_bytes;
  const device_address lo = addr / g * g;
  return d.is_mapped(lo, round_up(addr + bytes, g) - lo);
}

std::size_t scenario_ops() {
  if (const char* v = std::getenv("PHASEALLOC_SCENARIO_OPS")) return std::strtoull(v, nullptr, 10);
  return 1'000'000;
}

/// Catches the block size of the last allocation (the model needs it for exact accounting).
struct last_alloc_sink final : trace_sink {
  std::size_t block_bytes = 0;
  std::size_t ooms = 0;
  void on_event(const trace_record& r) noexcept override {
    if (r.op == trace_op::alloc) block_bytes = r.block_bytes;
    if (r.op == trace_op::oom) ++ooms;
  }
};

struct model_block {
  device_address addr;
  std::size_t requested;
  std::size_t block;
};

struct scenario_config {
  const char* name;
  bool virtual_memory;
  bool expandable;
  const char* policy_spec = nullptr;  ///< A registry spec instead of basic_policy.
};

struct scenario_result {
  std::size_t ops = 0;
  std::size_t allocs = 0;
  std::size_t frees = 0;
  std::size_t ooms = 0;
  std::size_t cross_stream = 0;
};

void run_scenario(const scenario_config& config, std::uint64_t seed, std::size_t ops, scenario_result& out) {
  model_device_config device_config;
  device_config.capacity_bytes = 256 * mib;
  device_config.virtual_memory = config.virtual_memory;
  device_config.events_complete_immediately = false;
  model_device device(device_config);
  std::unique_ptr<policy> owned;
  if (config.policy_spec != nullptr) {
    owned = make_policy(config.policy_spec).value();
  } else {
    owned = std::make_unique<basic_policy>(basic_policy_options{.expandable_large = config.expandable});
  }
  policy& policy = *owned;
  {
    engine e(device, policy, engine_options{.strict = true, .check_invariants = true});
    last_alloc_sink sink;
    e.set_trace_sink(&sink);

    std::mt19937_64 rng(seed);
    std::vector<model_block> live;
    std::map<device_address, std::size_t> intervals;  // addr -> block bytes, to check overlap
    std::int64_t allocated = 0;
    std::int64_t requested = 0;
    const char* phase_names[] = {"generation", "inference", "training", "optimizer"};
    const std::size_t common_sizes[] = {512, 4096, 1 * mib, 3 * mib + 17, 20 * mib, 24 * mib};

    const auto random_size = [&]() -> std::size_t {
      if (rng() % 5 == 0) return common_sizes[rng() % std::size(common_sizes)];
      const double log_bytes = std::uniform_real_distribution<double>(0.0, 26.0)(rng);  // 1 B .. 64 MiB
      return static_cast<std::size_t>(std::exp2(log_bytes));
    };

    for (std::size_t i = 0; i < ops; ++i) {
      const unsigned roll = static_cast<unsigned>(rng() % 100);
      const unsigned alloc_share = live.size() < 64 ? 55 : 40;
      if (roll < alloc_share) {
        const std::size_t bytes = random_size();
        const stream_id stream = rng() % 3;
        auto r = e.allocate(bytes, stream);
        if (!r) {
          const oom_report& rep = r.error().report;
          EXPECT_EQ(r.error().code, errc::out_of_memory);
          // Genuine: after releasing the cache the device still could not give what was asked.
          EXPECT_LT(rep.device_free_bytes, rep.grow_bytes) << "seed " << seed << " op " << i;
          EXPECT_EQ(rep.allocated_bytes, static_cast<std::size_t>(allocated));
          ++out.ooms;
        } else {
          const device_address a = r.value();
          const std::size_t block = sink.block_bytes;
          EXPECT_GE(block, bytes);
          EXPECT_TRUE(mapped(device, a, block)) << "block outside mapped memory, op " << i;
          auto next = intervals.lower_bound(a);
          if (next != intervals.end()) {
            EXPECT_LE(a + block, next->first) << "overlap, op " << i;
          }
          if (next != intervals.begin()) {
            auto prev = std::prev(next);
            EXPECT_LE(prev->first + prev->second, a) << "overlap, op " << i;
          }
          intervals.emplace(a, block);
          live.push_back({a, bytes, block});
          allocated += static_cast<std::int64_t>(block);
          requested += static_cast<std::int64_t>(bytes);
          ++out.allocs;
        }
      } else if (roll < 90) {
        if (live.empty()) {
          ++out.ops;
          continue;
        }
        const std::size_t k = rng() % live.size();
        const model_block b = live[k];
        live[k] = live.back();
        live.pop_back();
        intervals.erase(b.addr);
        EXPECT_EQ(e.deallocate(b.addr, rng() % 2 ? b.requested : 0), errc::ok);
        allocated -= static_cast<std::int64_t>(b.block);
        requested -= static_cast<std::int64_t>(b.requested);
        ++out.frees;
      } else if (roll < 94) {
        if (live.empty()) {
          ++out.ops;
          continue;
        }
        EXPECT_EQ(e.record_stream(live[rng() % live.size()].addr, 1 + rng() % 3), errc::ok);
        ++out.cross_stream;
      } else if (roll < 96) {
        device.complete_events(rng() % 4);
      } else if (roll < 98) {
        switch (rng() % 3) {
          case 0: e.begin_phase(phase_names[rng() % 4]); break;
          case 1: e.end_phase(); break;
          default: e.set_phase(phase_names[rng() % 4]); break;
        }
      } else if (roll < 99) {
        release_step pages;
        pages.what = release_what::free_pages;
        e.release({pages});
      } else {
        e.empty_cache();
      }

      const device_stats s = e.stats();
      ASSERT_EQ(s.allocated_bytes[stat_type::all].current, allocated) << "seed " << seed << " op " << i;
      ASSERT_EQ(s.requested_bytes[stat_type::all].current, requested) << "seed " << seed << " op " << i;
      ASSERT_EQ(s.allocation[stat_type::all].current, static_cast<std::int64_t>(live.size()));
      ASSERT_EQ(static_cast<std::size_t>(s.reserved_bytes[stat_type::all].current), device.mapped_bytes());
      ASSERT_LE(device.mapped_bytes(), device_config.capacity_bytes);
      ++out.ops;
    }

    for (const model_block& b : live) EXPECT_EQ(e.deallocate(b.addr), errc::ok);
    e.empty_cache();  // waits for pending cross-stream frees, then releases everything
    EXPECT_EQ(e.stats().allocated_bytes[stat_type::all].current, 0);
    EXPECT_EQ(e.stats().active_bytes[stat_type::all].current, 0);
    EXPECT_EQ(e.stats().reserved_bytes[stat_type::all].current, 0);
    EXPECT_EQ(device.mapped_bytes(), 0u);
    EXPECT_EQ(sink.ooms, out.ooms);
    e.set_trace_sink(nullptr);
  }
  // The engine gave every reservation and event back when it went away.
  EXPECT_EQ(device.live_reservations(), 0u);
  EXPECT_EQ(device.live_events(), 0u);
}

class EngineScenarioTest : public ::testing::TestWithParam<scenario_config> {};

TEST_P(EngineScenarioTest, RandomSequencesKeepExactBooks) {
  const std::size_t total = scenario_ops();
  const std::uint64_t seeds[] = {1, 2, 3, 4};
  scenario_result sum;
  for (const std::uint64_t seed : seeds) {
    scenario_result r;
    run_scenario(GetParam(), seed, total / std::size(seeds), r);
    sum.ops += r.ops;
    sum.allocs += r.allocs;
    sum.frees += r.frees;
    sum.ooms += r.ooms;
    sum.cross_stream += r.cross_stream;
    if (HasFatalFailure()) return;
  }
  std::printf("[ scenario ] %s: %zu ops (%zu allocs, %zu frees, %zu OOMs, %zu cross-stream uses), 0 violations\n",
              GetParam().name, sum.ops, sum.allocs, sum.frees, sum.ooms, sum.cross_stream);
  EXPECT_GE(sum.ops, total - std::size(seeds));
  EXPECT_GT(sum.ooms, 0u) << "the scenario must provoke out-of-memory";
  EXPECT_GT(sum.cross_stream, 0u);
}

INSTANTIATE_TEST_SUITE_P(Devices, EngineScenarioTest,
                         ::testing::Values(scenario_config{"whole_segments", false, false},
                                           scenario_config{"vmm_pages", true, false},
                                           scenario_config{"vmm_expandable", true, true},
                                           // The default policy's transition release, reclaim and
                                           // map-ahead regrowth, at scales the 256 MiB model device reaches.
                                           scenario_config{"phasealloc_policy", true, true,
                                                           "phasealloc:release_threshold:0,reclaim_min_run:2MiB"},
                                           scenario_config{"phasealloc_phase_pools", true, true,
                                                           "phasealloc:release:all,release_threshold:0,phase_pools:true"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace phasealloc
