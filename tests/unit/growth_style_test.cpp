// The growth style of an expandable pool (policy.hpp, growth_style) is a decision of the policy,
// not of any one policy: a test policy that picks a style changes those decisions alone, on the
// engine's one growth path. Each test runs the same calls under both styles, and checks
// where the block lands, how many reservations and retries it took, or whether it failed.
#include <gtest/gtest.h>

#include <vector>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"

namespace phasealloc {
namespace {

constexpr std::size_t page_bytes = 2 * mib;
constexpr std::size_t oversize_bytes = 8 * mib;  ///< A smaller request may not take a block this large.

/// One expandable pool of 2 MiB pages whose growth follows `style`; a new segment would be 20 MiB
/// (what limit_by_segment_bytes checks); a request below 8 MiB may not take a cached block of
/// 8 MiB or more; on_oom runs `oom_plan`.
class rules_policy final : public policy {
 public:
  explicit rules_policy(growth_style style, release_plan oom_plan = {}) : oom_plan_(std::move(oom_plan)) {
    pools_.push_back(pool_traits{.name = "large", .expandable = true, .page_bytes = page_bytes, .growth = style});
  }
  std::string spec() const override { return "growth_style_test"; }
  std::span<const pool_traits> pools() const noexcept override { return pools_; }
  std::size_t round_bytes(std::size_t requested_bytes) const noexcept override { return round_up(requested_bytes, 512); }
  pool_id pool_for(const alloc_request& /*request*/, std::size_t /*rounded_bytes*/) const noexcept override { return 0; }
  std::size_t segment_bytes(pool_id /*pool*/, std::size_t /*rounded_bytes*/) const noexcept override { return 20 * mib; }
  bool may_use(pool_id /*pool*/, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept override {
    return !(rounded_bytes < oversize_bytes && block_bytes >= oversize_bytes);
  }
  bool should_split(pool_id /*pool*/, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept override {
    return block_bytes > rounded_bytes;
  }
  release_plan on_oom(const grow_context& /*context*/) override { return oom_plan_; }

 private:
  std::vector<pool_traits> pools_;
  release_plan oom_plan_;
};

/// A virtual-memory model device of 1 GiB, the test policy and a strict engine over both.
struct rig {
  explicit rig(growth_style style, release_plan oom_plan = {}, std::size_t limit_bytes = 0)
      : device(model_device_config{.capacity_bytes = gib, .virtual_memory = true}),
        pol(style, std::move(oom_plan)),
        eng(device, pol, engine_options{.strict = true, .check_invariants = true, .limit_bytes = limit_bytes}) {}

  device_address alloc(std::size_t bytes) {
    auto r = eng.allocate(bytes, 0);
    EXPECT_TRUE(r.has_value()) << "allocate(" << bytes << ") failed";
    return r.value_or(0);
  }
  std::int64_t reservations() const { return eng.stats().segment[stat_type::all].current; }
  std::int64_t retries() const { return eng.stats().num_alloc_retries; }

  model_device device;
  rules_policy pol;
  engine eng;
};

TEST(GrowthStyleTest, RankWithUnmappedTailPrefersABlockThatCannotGrow) {
  // [a 4 MiB][b 2 MiB][c 6 MiB][d 2 MiB][unmapped...]; a and d freed. Smallest fit is d (2 MiB),
  // but d ranks 2 MiB + the unmapped tail after it, so with the rule the walk goes on to a.
  for (const bool rule : {false, true}) {  // rule: expandable_segments
    rig r(rule ? growth_style::expandable_segments : growth_style::pages);
    const device_address a = r.alloc(4 * mib);
    r.alloc(2 * mib);
    r.alloc(6 * mib);
    const device_address d = r.alloc(2 * mib);
    ASSERT_EQ(r.eng.deallocate(a), errc::ok);
    ASSERT_EQ(r.eng.deallocate(d), errc::ok);
    EXPECT_EQ(r.alloc(2 * mib), rule ? a : d) << "rank_with_unmapped_tail " << rule;
  }
}

TEST(GrowthStyleTest, GrowThroughChainGrowsIntoABlockBestFitRefused) {
  // [f 8 MiB free][unmapped...]: best fit refuses f for a 2 MiB request (may_use). Off: growth
  // skips the run after f (f alone holds the request) and, with no other room, a second
  // reservation takes it. On: growth starts at f and hands out its front.
  for (const bool rule : {false, true}) {  // rule: expandable_segments
    rig r(rule ? growth_style::expandable_segments : growth_style::pages);
    const device_address f = r.alloc(oversize_bytes);
    ASSERT_EQ(r.eng.deallocate(f), errc::ok);
    const device_address got = r.alloc(2 * mib);
    EXPECT_EQ(got == f, rule) << "grow_through_chain " << rule;
    EXPECT_EQ(r.reservations(), rule ? 1 : 2) << "grow_through_chain " << rule;
  }
}

TEST(GrowthStyleTest, ReserveAtOnceMakesAReservationBeforeAnyReleaseStep) {
  // [l1 100 MiB][hole 500 MiB, pages released][l2 400 MiB][unmapped tail 152 MiB]: a 520 MiB
  // request finds no room in the reservation under either style (no run and no chain holds it).
  // Pages: the on_oom plan runs first (one counted retry), and a new reservation only after it.
  // Expandable segments: a new reservation at once, no release step and no retry.
  for (const bool torch_style : {false, true}) {
    rig r(torch_style ? growth_style::expandable_segments : growth_style::pages, release_plan{release_step{}});
    r.alloc(100 * mib);
    const device_address hole = r.alloc(500 * mib);
    r.alloc(400 * mib);
    ASSERT_EQ(r.eng.deallocate(hole), errc::ok);
    release_step pages;
    pages.what = release_what::free_pages;
    ASSERT_EQ(r.eng.release(release_plan{pages}), 500 * mib);
    r.alloc(520 * mib);
    EXPECT_EQ(r.retries(), torch_style ? 0 : 1) << "expandable_segments " << torch_style;
    EXPECT_EQ(r.reservations(), 2) << "expandable_segments " << torch_style;
  }
}

TEST(GrowthStyleTest, LimitBySegmentBytesChecksThePolicysSegmentSize) {
  // A 10 MiB limit. Off: the 2 MiB page mapped is checked, and fits. On: the policy's segment
  // size (20 MiB) is checked once, and does not.
  for (const bool rule : {false, true}) {  // rule: expandable_segments
    rig r(rule ? growth_style::expandable_segments : growth_style::pages, {}, 10 * mib);
    const auto got = r.eng.allocate(2 * mib, 0);
    EXPECT_EQ(got.has_value(), !rule) << "limit_by_segment_bytes " << rule;
    if (!got) {
      EXPECT_EQ(got.error().code, errc::out_of_memory);
    }
  }
}

}  // namespace
}  // namespace phasealloc
