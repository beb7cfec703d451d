// phasealloc tune's decisions (tools/cli/tune_search.hpp): the front, the weight, the
// recommendation and the line to paste.
#include <gtest/gtest.h>

#include "sweep_grid.hpp"
#include "tune_search.hpp"

namespace phasealloc::cli {
namespace {

tune_candidate make(std::string spec, std::size_t peak, std::int64_t calls, std::int64_t ooms = 0) {
  tune_candidate c;
  c.spec = std::move(spec);
  c.peak_reserved_bytes = peak;
  c.device_calls = calls;
  c.ooms = ooms;
  return c;
}

TEST(TuneSearch, FrontKeepsWhatNothingBeatsOnBothMeasuresByPeak) {
  const std::vector<tune_candidate> c{
      make("a", 100, 50),      // front: fewest calls
      make("b", 90, 80),       // front
      make("c", 95, 90),       // beaten by b on both
      make("d", 80, 200),      // front: lowest peak
      make("e", 70, 10, 1),    // best on both, but ran out of memory: refused
      make("f", 90, 80),       // equal to b on both: b, the first, stays
  };
  EXPECT_EQ(pareto_front(c), (std::vector<std::size_t>{3, 1, 0}));
}

TEST(TuneSearch, EverythingRefusedLeavesNoFrontAndNoRecommendation) {
  const std::vector<tune_candidate> c{make("a", 1, 1, 2), make("b", 2, 2, 1)};
  const auto front = pareto_front(c);
  EXPECT_TRUE(front.empty());
  EXPECT_FALSE(recommend(c, front, 0.0).has_value());
}

TEST(TuneSearch, WeightZeroPicksTheLowestPeakAndAWeightOnCallsMovesAlongTheFront) {
  const std::vector<tune_candidate> c{make("low_calls", 110, 100), make("middle", 102, 150), make("low_peak", 100, 400)};
  const auto front = pareto_front(c);
  ASSERT_EQ(front.size(), 3u);
  EXPECT_EQ(recommend(c, front, 0.0), 2u);
  // scores with W = 0.1: 1.10 + 0.1, 1.02 + 0.15, 1.00 + 0.4
  EXPECT_EQ(recommend(c, front, 0.1), 1u);
  // W = 1: 1.10 + 1, 1.02 + 1.5, 1.00 + 4
  EXPECT_EQ(recommend(c, front, 1.0), 0u);
}

TEST(TuneSearch, WeightIsCallsEqualsANonNegativeNumber) {
  EXPECT_DOUBLE_EQ(parse_tune_weight("calls=0").value(), 0.0);
  EXPECT_DOUBLE_EQ(parse_tune_weight("calls=0.25").value(), 0.25);
  EXPECT_NE(parse_tune_weight("calls").error().find("expected calls=W"), std::string::npos);
  EXPECT_NE(parse_tune_weight("peak=1").error().find("unknown measure \"peak\""), std::string::npos);
  for (const char* bad : {"calls=", "calls=-1", "calls=nan", "calls=inf", "calls=1x", "calls=1e999"}) {
    auto w = parse_tune_weight(bad);
    ASSERT_FALSE(w.has_value()) << bad;
    EXPECT_NE(w.error().find("is not a finite number >= 0"), std::string::npos) << w.error();
  }
}

TEST(TuneSearch, PasteLineNamesTheVariableEachAllocatorReads) {
  EXPECT_EQ(paste_line("phasealloc:release:all,reclaim_min_run:32MiB"),
            "PHASEALLOC=1 PHASEALLOC_CONF='policy:[phasealloc:release:all,reclaim_min_run:32MiB]'");
  EXPECT_EQ(paste_line("phasealloc"), "PHASEALLOC=1   (phasealloc's default policy)");
  EXPECT_NE(paste_line("pytorch:expandable_segments:True").find("PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'"),
            std::string::npos);
  EXPECT_NE(paste_line("pytorch").find("leave PHASEALLOC and PYTORCH_CUDA_ALLOC_CONF unset"), std::string::npos);
}

TEST(TuneSearch, AnOffloadModeJoinsThePasteLineAndTheName) {
  EXPECT_EQ(paste_line("phasealloc:release:all", offload_replay::pressure),
            "PHASEALLOC=1 PHASEALLOC_CONF='policy:[phasealloc:release:all],offload:pressure'");
  EXPECT_EQ(paste_line("phasealloc", offload_replay::recorded),
            "PHASEALLOC=1 PHASEALLOC_CONF='offload:auto'   (phasealloc's default policy)");
  EXPECT_EQ(paste_line("phasealloc", offload_replay::none), "PHASEALLOC=1   (phasealloc's default policy)");
  tune_candidate c;
  c.spec = "phasealloc";
  EXPECT_EQ(candidate_name(c), "phasealloc");
  c.offload = offload_replay::recorded;
  EXPECT_EQ(candidate_name(c), "phasealloc + offload:auto");
  c.spec = "pytorch";  // PyTorch's allocator has no offload, whatever the replay did with the calls
  EXPECT_EQ(candidate_name(c), "pytorch");
  EXPECT_TRUE(is_pytorch_spec("pytorch:expandable_segments:True"));
  EXPECT_FALSE(is_pytorch_spec("phasealloc:release:all"));
}

TEST(TuneSearch, DefaultSpaceSpansBothAllocatorsAndExpands) {
  std::vector<std::string> specs;
  for (const std::string& g : default_tune_grids()) {
    auto e = expand_grid(g);
    ASSERT_TRUE(e.has_value()) << e.error();
    specs.insert(specs.end(), e.value().begin(), e.value().end());
  }
  const auto has = [&](std::string_view s) { return std::find(specs.begin(), specs.end(), s) != specs.end(); };
  EXPECT_TRUE(has("pytorch"));
  EXPECT_TRUE(has("pytorch:expandable_segments:True"));
  EXPECT_TRUE(has("phasealloc:release:adaptive,reclaim_min_run:128MiB,grow:20MiB"));  // the default's keys
  EXPECT_GE(specs.size(), 20u);
}

}  // namespace
}  // namespace phasealloc::cli
