// Colocation headroom (tools/replay residency.hpp): reserved while each phase runs, time-weighted,
// and what each transition returned. The actor of tests/data/colocate (2 GiB of weights, 6 GiB of
// activations in `train` at t=20 and t=100, phases idle [0,10) train [10,35) sync [35,40)
// idle [40,90) train [90,115) sync [115,120) idle [120,130]):
//   pytorch                  keeps the freed 6 GiB segment: idle holds 2 GiB for 9 ns, then 8 GiB
//                            for 60 ns: mean (2*9 + 8*60) / 70 GiB; nothing is returned.
//   phasealloc:release:all   returns the 6 GiB at each train -> sync transition: idle holds 2 GiB
//                            from t=1 on: mean (2*9 + 2*60) / 70 GiB.
#include <filesystem>

#include <gtest/gtest.h>

#include "phasealloc/replay/replay.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

trace actor() {
  const std::filesystem::path path = std::filesystem::path(PHASEALLOC_SOURCE_DIR) / "tests/data/colocate/actor.txt";
  return testing::load_text_trace(path);
}

const transition_summary* kind(const std::vector<transition_summary>& all, std::string_view from, std::string_view to) {
  for (const transition_summary& s : all) {
    if (s.from == from && s.to == to) return &s;
  }
  return nullptr;
}

TEST(ReplayHeadroom, PytorchKeepsItsCacheWhileIdle) {
  auto r = replay(actor(), "pytorch");
  ASSERT_TRUE(r.has_value()) << r.error();
  const colocation_headroom& h = r.value().headroom;
  EXPECT_EQ(h.weighted_by, "time");
  const phase_residency* idle = h.phase("idle");
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(idle->intervals, 3);
  EXPECT_EQ(idle->duration_ns, 70u);
  EXPECT_EQ(idle->peak_reserved_bytes, 8 * gib);
  EXPECT_NEAR(idle->mean_reserved_bytes, (2.0 * 9 + 8.0 * 60) / 70 * gib, 1.0);
  EXPECT_EQ(h.phase("unphased"), nullptr);  // the trace starts with a phase: no unphased time
  ASSERT_EQ(h.transitions.size(), 7u);
  for (const transition_return& t : h.transitions) EXPECT_EQ(t.returned_bytes(), 0u) << t.from << " -> " << t.to;
}

TEST(ReplayHeadroom, ReleaseAtTransitionsFreesTheIdlePhase) {
  auto r = replay(actor(), "phasealloc:release:all");
  ASSERT_TRUE(r.has_value()) << r.error();
  const colocation_headroom& h = r.value().headroom;
  const phase_residency* idle = h.phase("idle");
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(idle->peak_reserved_bytes, 2 * gib);
  EXPECT_NEAR(idle->mean_reserved_bytes, (2.0 * 9 + 2.0 * 60) / 70 * gib, 1.0);
  const phase_residency* train = h.phase("train");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->peak_reserved_bytes, 8 * gib);
  EXPECT_EQ(train->duration_ns, 50u);
  const std::vector<transition_summary> kinds = h.summarize_transitions();
  const transition_summary* to_sync = kind(kinds, "train", "sync");
  ASSERT_NE(to_sync, nullptr);
  EXPECT_EQ(to_sync->count, 2u);
  EXPECT_EQ(to_sync->returned_total_bytes, 12 * gib);
  EXPECT_EQ(to_sync->returned_max_bytes, 6 * gib);
  const transition_summary* to_idle = kind(kinds, "sync", "idle");
  ASSERT_NE(to_idle, nullptr);
  EXPECT_EQ(to_idle->returned_total_bytes, 0u);
  // Each transition is listed with the levels around it.
  const transition_return& first = h.transitions[2];  // t=35, train -> sync
  EXPECT_EQ(first.time_ns, 35u);
  EXPECT_EQ(first.reserved_before_bytes, 8 * gib);
  EXPECT_EQ(first.reserved_after_bytes, 2 * gib);
}

TEST(ResidencyMeter, WeighsByEventsWhenTheTraceHasNoTime) {
  residency_meter m("a", false);
  m.advance(0);
  m.level(100);
  m.advance(0);  // one event at 100 in a
  m.level(300);
  m.advance(0);  // one event at 300 in a
  m.transition(2, 0, "b", 300, 200);
  m.advance(0);  // one event at 200 in b
  m.level(200);
  const colocation_headroom h = m.finish();
  EXPECT_EQ(h.weighted_by, "events");
  ASSERT_EQ(h.phases.size(), 2u);
  EXPECT_EQ(h.phases[0].duration_ns, 2u);
  EXPECT_DOUBLE_EQ(h.phases[0].mean_reserved_bytes, 200.0);
  EXPECT_EQ(h.phases[1].duration_ns, 1u);
  EXPECT_DOUBLE_EQ(h.phases[1].mean_reserved_bytes, 200.0);
  ASSERT_EQ(h.transitions.size(), 1u);
  EXPECT_EQ(h.transitions[0].returned_bytes(), 100u);
}

TEST(ResidencyMeter, APhaseThatLastedNoTimeHoldsTheLevelItWasEnteredAt) {
  residency_meter m("a", true);
  m.advance(0);
  m.level(100);
  m.advance(10);
  m.transition(1, 10, "b", 100, 40);
  m.transition(2, 10, "c", 40, 40);
  m.advance(20);
  const colocation_headroom h = m.finish();
  ASSERT_NE(h.phase("b"), nullptr);
  EXPECT_EQ(h.phase("b")->duration_ns, 0u);
  EXPECT_DOUBLE_EQ(h.phase("b")->mean_reserved_bytes, 40.0);
  EXPECT_DOUBLE_EQ(h.phase("a")->mean_reserved_bytes, 100.0);
  EXPECT_DOUBLE_EQ(h.phase("c")->mean_reserved_bytes, 40.0);
}

}  // namespace
}  // namespace phasealloc
