// What the engine gives a policy that places blocks by lifetime: each block's birth interval, the
// live blocks at a transition (transition_context::live_blocks), and lowest-address placement.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc {
namespace {

/// The phasealloc policy (no releases), with what the engine hands over at each transition
/// recorded, and lowest-address placement for one request size.
class observing_policy final : public policy {
 public:
  explicit observing_policy(std::size_t lowest_bytes = 0)
      : inner_(make_policy("phasealloc:release:none,reclaim:false,grow:2MiB").value()), lowest_bytes_(lowest_bytes) {}
  struct seen {
    std::uint32_t interval = 0;
    std::vector<live_block> live;
  };
  std::vector<seen> transitions;

  std::string spec() const override { return inner_->spec(); }
  std::span<const pool_traits> pools() const noexcept override { return inner_->pools(); }
  std::size_t round_bytes(std::size_t requested_bytes) const noexcept override { return inner_->round_bytes(requested_bytes); }
  pool_id pool_for(const alloc_request& r, std::size_t rounded) const noexcept override { return inner_->pool_for(r, rounded); }
  placement placement_for(const alloc_request& r, std::size_t /*rounded*/) const noexcept override {
    return r.requested_bytes == lowest_bytes_ ? placement::lowest_address : placement::best_fit;
  }
  std::size_t segment_bytes(pool_id pool, std::size_t rounded) const noexcept override {
    return inner_->segment_bytes(pool, rounded);
  }
  bool should_split(pool_id pool, std::size_t block, std::size_t rounded) const noexcept override {
    return inner_->should_split(pool, block, rounded);
  }
  release_plan on_oom(const grow_context& c) override { return inner_->on_oom(c); }
  bool wants_live_blocks() const noexcept override { return true; }
  release_plan on_transition(const transition_context& c) override {
    transitions.push_back({c.interval, {c.live_blocks.begin(), c.live_blocks.end()}});
    return {};
  }

 private:
  std::unique_ptr<policy> inner_;
  std::size_t lowest_bytes_;
};

struct rig {
  explicit rig(std::size_t lowest_bytes = 0)
      : device(model_device_config{.capacity_bytes = 1 * gib, .virtual_memory = true}),
        pol(lowest_bytes),
        eng(device, pol, engine_options{.strict = true, .check_invariants = true}) {}
  device_address alloc(std::size_t bytes) { return eng.allocate(bytes, 0).value(); }
  model_device device;
  observing_policy pol;
  engine eng;
};

std::uint32_t birth_of(const std::vector<live_block>& live, std::size_t requested_bytes) {
  const auto it = std::find_if(live.begin(), live.end(), [&](const live_block& b) { return b.requested_bytes == requested_bytes; });
  EXPECT_NE(it, live.end()) << "no live block of " << requested_bytes << " bytes";
  return it == live.end() ? UINT32_MAX : it->birth_interval;
}

TEST(EngineLifetimeTest, TransitionsListTheLiveBlocksWithTheIntervalTheyWereMadeIn) {
  rig r;
  r.alloc(3 * mib);                            // interval 0, outlives everything
  const device_address t = r.alloc(5 * mib);   // interval 0, freed in interval 1
  r.eng.set_phase("training");                 // ends interval 0
  r.alloc(7 * mib);                            // interval 1
  ASSERT_EQ(r.eng.deallocate(t), errc::ok);
  r.eng.set_phase("training");                 // a new interval of the same phase ends interval 1
  r.eng.set_phase("optimizer");                // ends interval 2 (nothing made in it)

  ASSERT_EQ(r.pol.transitions.size(), 3u);
  EXPECT_EQ(r.pol.transitions[0].interval, 0u);
  EXPECT_EQ(r.pol.transitions[0].live.size(), 2u);
  EXPECT_EQ(birth_of(r.pol.transitions[0].live, 3 * mib), 0u);
  EXPECT_EQ(birth_of(r.pol.transitions[0].live, 5 * mib), 0u);
  EXPECT_EQ(r.pol.transitions[1].interval, 1u);
  EXPECT_EQ(r.pol.transitions[1].live.size(), 2u);  // the 5 MiB block died
  EXPECT_EQ(birth_of(r.pol.transitions[1].live, 3 * mib), 0u);
  EXPECT_EQ(birth_of(r.pol.transitions[1].live, 7 * mib), 1u);
  EXPECT_EQ(r.pol.transitions[2].interval, 2u);
}

TEST(EngineLifetimeTest, ABlockTakenBackOnTheFastPathIsBornAgain) {
  // A free followed by an allocation of the same size takes the deferred block back without the
  // full allocation path; the block handed out is a new allocation, born in the current interval.
  rig r;
  const device_address a = r.alloc(4 * kib);
  r.eng.set_phase("generation");
  ASSERT_EQ(r.eng.deallocate(a), errc::ok);
  const device_address again = r.alloc(4 * kib);
  EXPECT_EQ(again, a);  // the same block: the fast path served it
  r.eng.set_phase("training");
  ASSERT_EQ(r.pol.transitions.size(), 2u);
  EXPECT_EQ(birth_of(r.pol.transitions[1].live, 4 * kib), 1u);
}

TEST(EngineLifetimeTest, LowestAddressPlacementTakesTheLowestHoleThatFits) {
  // Two holes: 8 MiB low, 4 MiB high. Best fit takes the high one (smaller); lowest-address
  // placement the low one.
  for (const bool lowest : {false, true}) {
    rig r(lowest ? 3 * mib : 0);
    const device_address low = r.alloc(8 * mib);
    r.alloc(2 * mib);
    const device_address high = r.alloc(4 * mib);
    r.alloc(2 * mib);
    ASSERT_EQ(r.eng.deallocate(low), errc::ok);
    ASSERT_EQ(r.eng.deallocate(high), errc::ok);
    const device_address placed = r.alloc(3 * mib);
    EXPECT_EQ(placed, lowest ? low : high) << (lowest ? "lowest address" : "best fit");
    EXPECT_TRUE(r.eng.check_invariants().empty());
  }
}

}  // namespace
}  // namespace phasealloc
