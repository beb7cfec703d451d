// Colocated processes on one model device. The actor (tests/data/colocate/
// actor.txt) holds 2 GiB of weights and trains with 6 GiB of activations at t=20 and t=100; the
// rollout engine (rollout.txt) holds 2 GiB and generates with 6 GiB at t=60, while the actor is
// idle. On one 11 GiB device:
//   pytorch    the actor's freed 6 GiB stays cached in its segment (8 GiB reserved), the rollout
//              engine holds 2 GiB, so its 6 GiB cudaMalloc finds 1 GiB free; it can free only its
//              own cache (none): out of memory at its event 3 (t=60). Peaks: actor 8 GiB, rollout
//              2 GiB, device 10 GiB (from t=20, the actor's 8 + the rollout's 2).
//   phasealloc at the actor's sync -> idle transition (t=40; idle needed 2 GiB the last time) it
//              unmaps the 6 GiB, so the rollout engine maps its 6 GiB; the rollout engine does the
//              same at score -> idle (t=80), so the actor's second 6 GiB fits too. Peaks: 8 GiB
//              each, device 10 GiB.
// Each process cycles through three phases: on a two-phase ping-pong (idle -> train -> idle) the
// adaptive release keeps the ending phase's need (phasealloc_policy::on_transition), and the
// rollout engine runs out of memory under phasealloc too (TwoPhasePingPongKeepsTheCache).
// Alone, each trace fits the 11 GiB device under pytorch: it is the colocation that fails.
#include <filesystem>

#include <gtest/gtest.h>

#include "phasealloc/replay/colocate.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

constexpr std::size_t two_gib = 2 * gib;
constexpr std::size_t six_gib = 6 * gib;
constexpr std::size_t eight_gib = 8 * gib;
constexpr std::size_t ten_gib = 10 * gib;

trace load(const char* name) {
  const std::filesystem::path path = std::filesystem::path(PHASEALLOC_SOURCE_DIR) / "tests/data/colocate" / name;
  return testing::load_text_trace(path);
}

replay_options at_capacity(std::size_t bytes) {
  replay_options o;
  o.capacity_bytes = bytes;
  o.check_invariants = true;
  return o;
}

class ReplayColocateTest : public ::testing::Test {
 protected:
  std::vector<trace> traces{load("actor.txt"), load("rollout.txt")};
};

TEST_F(ReplayColocateTest, EachTraceAloneFitsUnderPytorch) {
  for (const trace& t : traces) {
    auto r = replay(t, "pytorch", at_capacity(11 * gib));
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(r.value().ooms, 0);
    EXPECT_EQ(r.value().peak_reserved_bytes, eight_gib);
  }
}

TEST_F(ReplayColocateTest, PytorchCacheOfTheActorStarvesTheRolloutEngine) {
  auto r = replay_colocated(traces, "pytorch", at_capacity(11 * gib));
  ASSERT_TRUE(r.has_value()) << r.error();
  const colocated_result& x = r.value();
  EXPECT_EQ(x.device, "model (whole segments)");
  EXPECT_EQ(x.events, 21u);
  ASSERT_EQ(x.processes.size(), 2u);
  EXPECT_EQ(x.processes[0].peak_reserved_bytes, eight_gib);
  EXPECT_EQ(x.processes[0].peak_allocated_bytes, eight_gib);
  EXPECT_EQ(x.processes[0].ooms, 0);
  EXPECT_FALSE(x.processes[0].first_oom.has_value());
  EXPECT_EQ(x.processes[0].device_allocs, 2);  // 2 GiB, 6 GiB; the second 6 GiB reuses the cache
  EXPECT_EQ(x.processes[1].peak_reserved_bytes, two_gib);
  EXPECT_EQ(x.processes[1].peak_allocated_bytes, two_gib);
  EXPECT_EQ(x.processes[1].ooms, 1);
  EXPECT_EQ(x.ooms, 1);
  ASSERT_TRUE(x.first_oom.has_value());
  EXPECT_EQ(x.first_oom->process, 1u);
  EXPECT_EQ(x.first_oom->event, 3u);
  EXPECT_EQ(x.first_oom->time_ns, 60u);
  EXPECT_EQ(x.first_oom->requested_bytes, six_gib);
  ASSERT_TRUE(x.processes[1].first_oom.has_value());
  EXPECT_EQ(x.processes[1].first_oom->event, 3u);
  // The device: actor 8 + rollout 2 from the actor's activations at t=20 (merged event 5).
  EXPECT_EQ(x.peak_reserved_bytes, ten_gib);
  EXPECT_EQ(x.peak_time_ns, 20u);
  EXPECT_EQ(x.peak_event, 5u);
  EXPECT_EQ(x.reserved_at_peak_bytes, (std::vector<std::size_t>{eight_gib, two_gib}));
}

TEST_F(ReplayColocateTest, PhaseallocReleasesAtTransitionsAndBothFit) {
  auto r = replay_colocated(traces, "phasealloc", at_capacity(11 * gib));
  ASSERT_TRUE(r.has_value()) << r.error();
  const colocated_result& x = r.value();
  EXPECT_EQ(x.device, "model (virtual memory)");
  ASSERT_EQ(x.processes.size(), 2u);
  EXPECT_EQ(x.ooms, 0);
  EXPECT_FALSE(x.first_oom.has_value());
  for (const colocated_process& p : x.processes) {
    EXPECT_EQ(p.peak_reserved_bytes, eight_gib);
    EXPECT_EQ(p.peak_allocated_bytes, eight_gib);
    EXPECT_EQ(p.ooms, 0);
    EXPECT_FALSE(p.first_oom.has_value());
  }
  EXPECT_EQ(x.peak_reserved_bytes, ten_gib);
  EXPECT_EQ(x.peak_time_ns, 20u);
  EXPECT_EQ(x.reserved_at_peak_bytes, (std::vector<std::size_t>{eight_gib, two_gib}));
}

TEST_F(ReplayColocateTest, TwoPhasePingPongKeepsTheCache) {
  // Without the actor's sync phase, train -> idle follows idle -> train: a ping-pong, so the
  // adaptive release keeps train's 8 GiB and the rollout engine finds 1 GiB free at t=60.
  std::vector<trace> ping_pong = traces;
  std::erase_if(ping_pong[0].events, [](const trace_event& e) { return e.op == trace_event_op::phase && e.name == 2; });
  ASSERT_EQ(ping_pong[0].events.size(), 11u);
  auto r = replay_colocated(ping_pong, "phasealloc", at_capacity(11 * gib));
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_TRUE(r.value().first_oom.has_value());
  EXPECT_EQ(r.value().first_oom->process, 1u);
  EXPECT_EQ(r.value().first_oom->time_ns, 60u);
  EXPECT_EQ(r.value().processes[0].peak_reserved_bytes, eight_gib);
  // release:all returns every free page at each transition: both fit again.
  auto all = replay_colocated(ping_pong, "phasealloc:release:all", at_capacity(11 * gib));
  ASSERT_TRUE(all.has_value()) << all.error();
  EXPECT_EQ(all.value().ooms, 0);
  EXPECT_EQ(all.value().processes[1].peak_reserved_bytes, eight_gib);
}

TEST_F(ReplayColocateTest, ExpandableSegmentsNeverShrinkAndAlsoFail) {
  auto r = replay_colocated(traces, "pytorch:expandable_segments:True", at_capacity(11 * gib));
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_TRUE(r.value().first_oom.has_value());
  EXPECT_EQ(r.value().first_oom->process, 1u);
  EXPECT_EQ(r.value().first_oom->event, 3u);
  EXPECT_EQ(r.value().ooms, 1);
}

TEST(ReplayColocateTieTest, EventsAtTheSameTimeGoInTraceOrder) {
  const auto one_alloc = [](const char* name) {
    auto t = parse_trace_text("# phasealloc-trace v1\nstream_count 1\n0 alloc 0 3221225472 0 0 0 -\n", name);
    EXPECT_TRUE(t.has_value());
    return std::move(t).value();
  };
  std::vector<trace> traces{one_alloc("a"), one_alloc("b")};
  auto r = replay_colocated(traces, "pytorch", at_capacity(4 * gib));
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_TRUE(r.value().first_oom.has_value());
  EXPECT_EQ(r.value().first_oom->process, 1u);  // both at t=0: the first trace allocates first
  EXPECT_EQ(r.value().processes[0].peak_reserved_bytes, 3 * gib);
  EXPECT_EQ(r.value().processes[1].peak_reserved_bytes, 0u);
}

TEST(ReplayColocateTieTest, RefusesNoTracesAndABadPolicy) {
  std::vector<trace> none;
  auto r = replay_colocated(none, "pytorch");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().find("at least one trace"), std::string::npos) << r.error();
  std::vector<trace> one(1);
  auto bad = replay_colocated(one, "bogus");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().find("bogus"), std::string::npos) << bad.error();
}

}  // namespace
}  // namespace phasealloc
