// Tests of the `pytorch` policy on the engine and the model device: every expected number below is
// what PyTorch's native CUDACachingAllocator does for the same calls (worked out by hand from
// c10/cuda/CUDACachingAllocator.cpp; the comments show the arithmetic).
#include "phasealloc/policies/pytorch_policy.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;

pytorch_policy::options must_parse(std::string_view conf) {
  auto o = pytorch_policy::parse(conf);
  EXPECT_TRUE(o.has_value()) << conf << ": " << (o ? "" : o.error());
  return o.value_or(pytorch_policy::options{});
}

std::string conf_error(std::string_view conf) {
  auto o = pytorch_policy::create(conf);
  EXPECT_FALSE(o.has_value()) << conf << " was accepted";
  return o ? std::string() : o.error();
}

/// A model device, the policy built from `conf`, and a strict engine over both.
class rig {
 public:
  explicit rig(std::string_view conf, std::size_t capacity_bytes = gib, bool virtual_memory = false)
      : device_(model_device_config{.capacity_bytes = capacity_bytes, .virtual_memory = virtual_memory}),
        policy_(must_parse(conf)),
        engine_(device_, policy_, engine_options{.strict = true, .check_invariants = true}) {}

  device_address alloc(std::size_t bytes, stream_id stream = 0) {
    auto r = engine_.allocate(bytes, stream);
    EXPECT_TRUE(r.has_value()) << "allocate(" << bytes << "): " << (r ? "" : format_oom_report(r.error().report));
    return r.value_or(0);
  }
  void free(device_address addr) { EXPECT_EQ(engine_.deallocate(addr), errc::ok); }
  std::size_t reserved() const {
    return static_cast<std::size_t>(engine_.stats().reserved_bytes[stat_type::all].current);
  }
  std::size_t allocated() const {
    return static_cast<std::size_t>(engine_.stats().allocated_bytes[stat_type::all].current);
  }
  std::size_t segments() const { return static_cast<std::size_t>(engine_.stats().segment[stat_type::all].current); }
  /// Sizes of the segments that hold no allocated block (cached), oldest first: highest address
  /// first, as the model device places each new segment below the older ones (model_device.hpp) and these
  /// tests never free one before making another.
  std::vector<std::size_t> cached_segments() const {
    std::vector<std::size_t> out;
    const std::vector<snapshot_segment> segments = engine_.take_snapshot().segments;
    for (auto s = segments.rbegin(); s != segments.rend(); ++s) {
      if (s->allocated_bytes == 0) out.push_back(s->mapped_bytes);
    }
    return out;
  }

  model_device device_;
  pytorch_policy policy_;
  engine engine_;
};

// --- pools and segment sizes (get_pool, get_allocation_size) --------------------------------------

struct segment_case {
  std::size_t request_bytes;
  std::size_t reserved_bytes;
  bool small;
};

TEST(PytorchPolicyTest, SegmentSizesFollowGetAllocationSize) {
  const segment_case table[] = {
      {1000, 2 * mib, true},                 // <= 1 MiB: a 2 MiB small segment
      {mib, 2 * mib, true},                  // exactly kSmallSize is still small
      {mib + 1, 20 * mib, false},            // (1 MiB, 10 MiB): kLargeBuffer
      {10 * mib - 512, 20 * mib, false},
      {10 * mib, 10 * mib, false},           // >= kMinLargeAlloc: rounded up to 2 MiB
      {11 * mib + 1, 12 * mib, false},
      {91 * mib, 92 * mib, false},
  };
  for (const segment_case& c : table) {
    rig r("");
    const device_address a = r.alloc(c.request_bytes);
    EXPECT_EQ(r.reserved(), c.reserved_bytes) << c.request_bytes;
    const device_stats s = r.engine_.stats();
    EXPECT_EQ(s.reserved_bytes[c.small ? stat_type::small_pool : stat_type::large_pool].current,
              static_cast<std::int64_t>(c.reserved_bytes));
    r.free(a);
  }
}

TEST(PytorchPolicyTest, LargeSegmentSizeSetsTheSegmentOfMidSizedRequests) {
  rig r("large_segment_size_mb:40");
  (void)r.alloc(2 * mib);  // torch: memory_reserved() == 40 MiB after a 2 MiB tensor
  EXPECT_EQ(r.reserved(), 40 * mib);
  rig big("large_segment_size_mb:40");
  (void)big.alloc(12 * mib);  // >= 10 MiB: rounded up to 2 MiB, whatever the large segment size
  EXPECT_EQ(big.reserved(), 12 * mib);
}

// --- should_split ------------------------------------------------------------------------------

TEST(PytorchPolicyTest, SmallBlocksSplitDownTo512Bytes) {
  rig r("");
  const device_address a = r.alloc(512);
  const device_address b = r.alloc(512);
  EXPECT_EQ(b, a + 512);
  EXPECT_EQ(r.reserved(), 2 * mib);
}

TEST(PytorchPolicyTest, LargeBlocksSplitOnlyWhenMoreThanOneMiBRemains) {
  {
    rig r("");
    (void)r.alloc(19 * mib);  // 20 MiB segment, 1 MiB left: not > 1 MiB, the block is whole
    EXPECT_EQ(r.allocated(), 20 * mib);
    EXPECT_EQ(r.engine_.stats().inactive_split[stat_type::all].current, 0);
  }
  {
    rig r("");
    (void)r.alloc(18 * mib + mib / 2);  // 1.5 MiB left: split
    EXPECT_EQ(r.allocated(), 18 * mib + mib / 2);
    EXPECT_EQ(r.engine_.stats().inactive_split[stat_type::all].current, 1);
  }
  {
    rig r("");
    const device_address a = r.alloc(mib + mib / 2);  // a 20 MiB segment shared by mid-sized requests
    const device_address b = r.alloc(mib + mib / 2);
    EXPECT_EQ(b, a + mib + mib / 2);
    EXPECT_EQ(r.reserved(), 20 * mib);
  }
}

// Three 20 MiB segments, each [9 MiB, 9 MiB, 2 MiB free]; the model device places each below the last.
// A 1.5 MiB request fits any 2 MiB tail unsplit (0.5 MiB would remain). torch 2.15 takes the
// oldest segment's tail (highest address here), torch 2.11 the lowest address (the newest
// segment's): both measured with the same calls on simcuda.
std::vector<device_address> three_segments_with_equal_tails(rig& r) {
  std::vector<device_address> tails;
  for (int i = 0; i < 3; ++i) {
    const device_address first = r.alloc(9 * mib);
    r.alloc(9 * mib);
    tails.push_back(first + 18 * mib);
  }
  EXPECT_GT(tails[0], tails[1]);
  EXPECT_GT(tails[1], tails[2]);
  return tails;
}

TEST(PytorchPolicyTest, EqualFreeBlocksGoOldestSegmentFirstAsTorch215Does) {
  rig r("");
  const std::vector<device_address> tails = three_segments_with_equal_tails(r);
  EXPECT_EQ(r.alloc(1548288), tails[0]);
  EXPECT_EQ(r.alloc(1548288), tails[1]);
}

TEST(PytorchPolicyTest, WithBlockOrderAddressEqualFreeBlocksGoLowestAddressFirstAsTorch211Does) {
  rig r("block_order:address");
  const std::vector<device_address> tails = three_segments_with_equal_tails(r);
  EXPECT_EQ(r.alloc(1548288), tails[2]);
  EXPECT_EQ(r.alloc(1548288), tails[1]);
}

TEST(PytorchPolicyTest, BlockOrderIsReadAndWrittenBack) {
  EXPECT_TRUE(must_parse("").segment_age_order);
  EXPECT_TRUE(must_parse("block_order:segment_age").segment_age_order);
  EXPECT_FALSE(must_parse("block_order:address").segment_age_order);
  EXPECT_EQ(pytorch_policy(must_parse("block_order:segment_age")).spec(), "pytorch");
  EXPECT_EQ(pytorch_policy(must_parse("block_order:address")).spec(), "pytorch:block_order:address");
  EXPECT_THAT(conf_error("block_order:newest"), HasSubstr("block_order"));
}

TEST(PytorchPolicyTest, OversizeRequestsAreNeverSplit) {
  rig r("max_split_size_mb:20");
  const device_address a = r.alloc(30 * mib);
  r.free(a);
  (void)r.alloc(25 * mib);  // 30 MiB block: 30 - 25 < 20 MiB, used whole (25 >= max_split: no split)
  EXPECT_EQ(r.allocated(), 30 * mib);
  EXPECT_EQ(r.reserved(), 30 * mib);
}

TEST(PytorchPolicyTest, ExpandableSegmentsSplitAnyRemainderOf512Bytes) {
  rig r("expandable_segments:True", gib, /*virtual_memory=*/true);
  const device_address a = r.alloc(19 * mib);  // one 20 MiB page; the 1 MiB remainder is split off
  EXPECT_EQ(r.allocated(), 19 * mib);
  const device_address b = r.alloc(mib + 512);  // too big for the remainder: one more page, and the
  EXPECT_EQ(b, a + 19 * mib);                   // free MiB just before it is used first
  EXPECT_EQ(r.reserved(), 40 * mib);
}

// --- oversize rules (get_free_block with max_split_size_mb) -------------------------------------

TEST(PytorchPolicyTest, SmallerRequestsDoNotTakeOversizeBlocks) {
  rig r("max_split_size_mb:100");
  r.free(r.alloc(150 * mib));
  (void)r.alloc(50 * mib);  // 50 < 100 and the 150 MiB block >= 100: a new segment
  EXPECT_EQ(r.reserved(), 200 * mib);
}

TEST(PytorchPolicyTest, OversizeRequestsRoundUpIntoCachedBlocksOnlyWithinTheLimit) {
  rig r("max_split_size_mb:100");
  const device_address a = r.alloc(150 * mib);
  r.free(a);
  const device_address b = r.alloc(140 * mib);  // 150 < 140 + 20: reused whole
  EXPECT_EQ(b, a);
  EXPECT_EQ(r.allocated(), 150 * mib);
  r.free(b);
  (void)r.alloc(120 * mib);  // 150 >= 120 + 20: refused, a new segment
  EXPECT_EQ(r.reserved(), 270 * mib);

  rig wider("max_split_size_mb:100,max_non_split_rounding_mb:40");
  const device_address c = wider.alloc(150 * mib);
  wider.free(c);
  EXPECT_EQ(wider.alloc(120 * mib), c);  // 150 < 120 + 40
}

TEST(PytorchPolicyTest, WithoutMaxSplitLargeCachedBlocksAreSplitForAnyRequest) {
  rig r("");
  const device_address a = r.alloc(150 * mib);
  r.free(a);
  EXPECT_EQ(r.alloc(50 * mib), a);
  EXPECT_EQ(r.reserved(), 150 * mib);
}

// --- out of memory: release_available_cached_blocks, then release_cached_blocks ----------------

TEST(PytorchPolicyTest, OnOomTheSmallestOversizeBlockThatCoversTheRequestGoesFirst) {
  rig r("max_split_size_mb:100", 450 * mib);
  const device_address a = r.alloc(150 * mib);
  const device_address b = r.alloc(200 * mib);
  const device_address c = r.alloc(50 * mib);
  r.free(a);
  r.free(b);
  r.free(c);
  // 120 MiB: the best cached fit (150) is refused (150 >= 120 + 20); growing needs 400 + 120 >
  // 450. release_available_cached_blocks frees the smallest block >= max(120, 100): the 150 MiB
  // one. Everything else stays cached.
  (void)r.alloc(120 * mib);
  EXPECT_EQ(r.reserved(), 370 * mib);
  EXPECT_EQ(r.cached_segments(), (std::vector<std::size_t>{200 * mib, 50 * mib}));
  // torch's alloc_block after release_available_cached_blocks is not a retry (isRetry=false).
  EXPECT_EQ(r.engine_.stats().num_alloc_retries, 0);
  EXPECT_EQ(r.engine_.stats().num_device_free, 1);
}

TEST(PytorchPolicyTest, OnOomOversizeBlocksGoLargestFirstWhenNoneCoversTheRequest) {
  rig r("max_split_size_mb:100", 300 * mib);
  const device_address a = r.alloc(110 * mib);
  const device_address b = r.alloc(105 * mib);
  const device_address c = r.alloc(50 * mib);
  r.free(a);
  r.free(b);
  r.free(c);
  // 130 MiB: no cached block >= 130; 265 + 130 > 300. No single oversize block covers 130, so
  // they go from the largest down until 130 MiB are back (110, then 105); the 50 MiB stays.
  (void)r.alloc(130 * mib);
  EXPECT_EQ(r.reserved(), 180 * mib);
  EXPECT_EQ(r.cached_segments(), (std::vector<std::size_t>{50 * mib}));
}

TEST(PytorchPolicyTest, OnOomEverythingCachedIsReleasedLast) {
  rig r("", 100 * mib);
  r.free(r.alloc(60 * mib, /*stream=*/0));
  // Stream 1 cannot reuse stream 0's block; 60 + 50 > 100, so release_cached_blocks frees it.
  (void)r.alloc(50 * mib, /*stream=*/1);
  EXPECT_EQ(r.reserved(), 50 * mib);
  EXPECT_EQ(r.engine_.stats().num_alloc_retries, 1);
  const auto too_big = r.engine_.allocate(60 * mib, 1);
  ASSERT_FALSE(too_big.has_value());
  EXPECT_EQ(too_big.error().code, errc::out_of_memory);
  // The failed retry counts too, as torch's num_alloc_retries does.
  EXPECT_EQ(r.engine_.stats().num_alloc_retries, 2);
  EXPECT_EQ(r.engine_.stats().num_ooms, 1);
}

TEST(PytorchPolicyTest, OnOomPlanFollowsMallocOrder) {
  pytorch_policy plain(must_parse(""));
  grow_context c;
  c.pool = pytorch_policy::large_pool;
  c.rounded_bytes = 30 * mib;
  c.request.stream = 3;
  const release_plan p = plain.on_oom(c);
  ASSERT_EQ(p.size(), 1u);  // no max_split: release_cached_blocks only
  EXPECT_TRUE(p[0].synchronize);
  EXPECT_FALSE(p[0].pool.has_value());

  pytorch_policy oversize(must_parse("max_split_size_mb:200"));
  const release_plan q = oversize.on_oom(c);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].pool, pytorch_policy::large_pool);
  EXPECT_EQ(q[0].stream, stream_id{3});
  EXPECT_EQ(q[0].min_segment_bytes, 200 * mib);
  EXPECT_EQ(q[0].target_bytes, 200 * mib);  // max(30 MiB, max_split)
  EXPECT_EQ(q[0].order, release_order::best_fit_then_largest);
  EXPECT_TRUE(q[1].synchronize);

  pytorch_policy expandable(must_parse("max_split_size_mb:200,expandable_segments:True"));
  EXPECT_EQ(expandable.on_oom(c).size(), 1u);  // torch never frees expandable blocks there
}

// --- garbage_collection_threshold ---------------------------------------------------------------

TEST(PytorchPolicyTest, GarbageCollectionFreesTheOldestCachedSegmentsFirst) {
  // Capacity 400 MiB x fraction 0.5 = a 200 MiB limit; threshold 0.5 -> collect above 100 MiB.
  rig r("per_process_memory_fraction:0.5,garbage_collection_threshold:0.5", 400 * mib);
  EXPECT_EQ(r.engine_.limit_bytes(), 200 * mib);
  const device_address a = r.alloc(40 * mib);  // large-pool lookups: 1
  const device_address b = r.alloc(50 * mib);  // 2
  r.free(a);                                   // A cached at lookup 2
  r.free(r.alloc(12 * mib, /*stream=*/1));     // 3: grows (reserved 90 <= 100, no GC) to 102
  for (int i = 0; i < 5; ++i) r.free(r.alloc(12 * mib, 1));  // 4..8: reuse stream 1's segment
  r.free(b);                                   // B cached at lookup 8
  // 60 MiB fits no cached block: before growing, reserved 102 > 100, so torch collects 2 MiB.
  // Ages at lookup 9: A 7, S 1, B 1; the mean is 3, so only A (the oldest) goes.
  (void)r.alloc(60 * mib);
  EXPECT_EQ(r.cached_segments(), (std::vector<std::size_t>{50 * mib, 12 * mib}));
  EXPECT_EQ(r.reserved(), 122 * mib);
  EXPECT_EQ(r.engine_.stats().num_device_free, 1);
}

TEST(PytorchPolicyTest, GarbageCollectionNeedsAMemoryLimit) {
  rig r("garbage_collection_threshold:0.5", 400 * mib);
  const device_address a = r.alloc(40 * mib);
  const device_address b = r.alloc(50 * mib);
  r.free(a);
  r.free(b);
  (void)r.alloc(200 * mib);
  EXPECT_EQ(r.reserved(), 290 * mib);  // nothing collected: torch's GC needs a fraction
  pytorch_policy p(must_parse("garbage_collection_threshold:0.5,per_process_memory_fraction:0.5"));
  grow_context c;
  c.reserved_bytes = 150 * mib;
  c.limit_bytes = 200 * mib;
  const release_plan plan = p.before_grow(c);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].pool, pytorch_policy::large_pool);
  EXPECT_EQ(plan[0].target_bytes, 50 * mib);
  EXPECT_EQ(plan[0].order, release_order::aged);
  c.reserved_bytes = 100 * mib;
  EXPECT_TRUE(p.before_grow(c).empty());  // at the threshold: nothing to do
  c.limit_bytes = 0;
  c.reserved_bytes = 150 * mib;
  EXPECT_TRUE(p.before_grow(c).empty());
  // torch's collector skips expandable blocks, and with expandable_segments every block is one.
  pytorch_policy expandable(
      must_parse("garbage_collection_threshold:0.5,per_process_memory_fraction:0.5,expandable_segments:True"));
  c.limit_bytes = 200 * mib;
  EXPECT_TRUE(expandable.before_grow(c).empty());
}

// --- expandable_segments ------------------------------------------------------------------------

TEST(PytorchPolicyTest, ExpandableSegmentsMapPagesAndUnmapThemOnEmptyCache) {
  rig r("expandable_segments:True", gib, /*virtual_memory=*/true);
  const device_address s = r.alloc(1000);  // small pool: one 2 MiB page
  EXPECT_EQ(r.reserved(), 2 * mib);
  const device_address a = r.alloc(3 * mib);  // large pool: one 20 MiB page
  EXPECT_EQ(r.reserved(), 22 * mib);
  const device_address b = r.alloc(25 * mib);  // 17 MiB free before the unmapped run: one more page
  EXPECT_EQ(b, a + 3 * mib);
  EXPECT_EQ(r.reserved(), 42 * mib);
  EXPECT_EQ(r.device_.mapped_bytes(), 42 * mib);
  r.free(s);
  r.free(a);
  r.free(b);
  r.engine_.empty_cache();
  EXPECT_EQ(r.reserved(), 0u);
  EXPECT_EQ(r.device_.mapped_bytes(), 0u);
}

TEST(PytorchPolicyTest, ExpandableLargePagesAreTheLargeSegmentSize) {
  rig r("expandable_segments:True,large_segment_size_mb:40", gib, /*virtual_memory=*/true);
  (void)r.alloc(3 * mib);
  EXPECT_EQ(r.reserved(), 40 * mib);
  (void)r.alloc(50 * mib);  // 37 MiB free + one more 40 MiB page
  EXPECT_EQ(r.reserved(), 80 * mib);
}

// --- configuration --------------------------------------------------------------------------------

TEST(PytorchPolicyTest, ReadsEveryKey) {
  const pytorch_policy::options o = must_parse(
      "max_split_size_mb:200,max_non_split_rounding_mb:64,roundup_power2_divisions:[256:1,>:4],"
      "garbage_collection_threshold:0.6,expandable_segments:True,large_segment_size_mb:32,"
      "per_process_memory_fraction:0.75");
  EXPECT_EQ(o.max_split_bytes, 200 * mib);
  EXPECT_EQ(o.max_non_split_rounding_bytes, 64 * mib);
  EXPECT_EQ(o.roundup_divisions.for_size(100 * mib), 1u);
  EXPECT_EQ(o.roundup_divisions.for_size(2 * gib), 4u);
  EXPECT_DOUBLE_EQ(o.garbage_collection_threshold, 0.6);
  EXPECT_TRUE(o.expandable_segments);
  EXPECT_EQ(o.large_segment_bytes, 32 * mib);
  EXPECT_DOUBLE_EQ(o.memory_fraction, 0.75);
}

TEST(PytorchPolicyTest, DefaultsAreTorchDefaults) {
  const pytorch_policy::options o = must_parse("");
  EXPECT_EQ(o.max_split_bytes, SIZE_MAX);
  EXPECT_EQ(o.max_non_split_rounding_bytes, 20 * mib);
  EXPECT_FALSE(o.roundup_divisions.enabled());
  EXPECT_EQ(o.garbage_collection_threshold, 0.0);
  EXPECT_FALSE(o.expandable_segments);
  EXPECT_EQ(o.large_segment_bytes, 20 * mib);
  EXPECT_EQ(o.memory_fraction, 1.0);
  EXPECT_EQ(pytorch_policy(o).spec(), "pytorch");
}

TEST(PytorchPolicyTest, AcceptsKeysWithNoEffectOnAReplay) {
  const pytorch_policy::options o = must_parse(
      "release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:False,pinned_num_register_threads:8,"
      "pinned_use_background_threads:True,graph_capture_record_stream_reuse:True,backend:native");
  EXPECT_EQ(pytorch_policy(o).spec(), pytorch_policy().spec());
}

TEST(PytorchPolicyTest, BadValuesNameTheKey) {
  EXPECT_THAT(conf_error("max_split_size_mb:10"),
              HasSubstr("'max_split_size_mb': 10 MB is too small: must be >= 20"));
  EXPECT_THAT(conf_error("max_split_size_mb:ten"), HasSubstr("'max_split_size_mb'"));
  EXPECT_THAT(conf_error("max_non_split_rounding_mb:4"), HasSubstr("'max_non_split_rounding_mb'"));
  EXPECT_THAT(conf_error("large_segment_size_mb:10"),
              HasSubstr("'large_segment_size_mb': 10 MB is too small: must be > 10"));
  EXPECT_THAT(conf_error("garbage_collection_threshold:1.0"), HasSubstr("'garbage_collection_threshold'"));
  EXPECT_THAT(conf_error("garbage_collection_threshold:0"), HasSubstr("not in (0.0, 1.0)"));
  EXPECT_THAT(conf_error("expandable_segments:true"),
              HasSubstr("'expandable_segments': \"true\" is not True or False"));
  EXPECT_THAT(conf_error("roundup_power2_divisions:[256:3]"), HasSubstr("'roundup_power2_divisions': \"3\""));
  EXPECT_THAT(conf_error("per_process_memory_fraction:0"), HasSubstr("'per_process_memory_fraction'"));
  EXPECT_THAT(conf_error("per_process_memory_fraction:1.5"), HasSubstr("not in (0.0, 1.0]"));
  EXPECT_THAT(conf_error("backend:cudaMallocAsync"), HasSubstr("'backend'"));
  EXPECT_THAT(conf_error("pinned_num_register_threads:3"), HasSubstr("'pinned_num_register_threads'"));
  EXPECT_THAT(conf_error("expandable_segments"), HasSubstr("no ':'"));
}

TEST(PytorchPolicyTest, UnknownKeysListTheValidOnes) {
  const std::string e = conf_error("max_split_size:200");
  EXPECT_THAT(e, HasSubstr("unknown key 'max_split_size'"));
  for (const char* key : {"max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
                          "garbage_collection_threshold", "expandable_segments", "large_segment_size_mb",
                          "per_process_memory_fraction", "release_lock_on_cudamalloc", "backend"}) {
    EXPECT_THAT(e, HasSubstr(key));
  }
}

TEST(PytorchPolicyTest, SpecRoundTripsThroughTheRegistry) {
  auto p = make_policy(
      "pytorch:max_split_size_mb:512,roundup_power2_divisions:[256:1,512:2,1024:4,>:8],"
      "garbage_collection_threshold:0.6,expandable_segments:True,per_process_memory_fraction:0.9");
  ASSERT_TRUE(p.has_value()) << p.error();
  const std::string spec = p.value()->spec();
  EXPECT_EQ(spec,
            "pytorch:max_split_size_mb:512,"
            "roundup_power2_divisions:[256:1,512:2,1024:8,>:8],garbage_collection_threshold:0.6,"
            "expandable_segments:True,per_process_memory_fraction:0.9");
  auto again = make_policy(spec);
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(again.value()->spec(), spec);
}

TEST(PytorchPolicyTest, MemoryFractionBecomesTheEngineLimit) {
  rig r("per_process_memory_fraction:0.25", 400 * mib);
  EXPECT_EQ(r.engine_.limit_bytes(), 100 * mib);
  (void)r.alloc(90 * mib);
  const auto refused = r.engine_.allocate(20 * mib, 0);  // 90 + 20 > 100, though the device has room
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, errc::out_of_memory);
}

TEST(PytorchPolicyTest, RoundingUsesTheDivisionsTable) {
  rig r("roundup_power2_divisions:4");
  (void)r.alloc(mib + 1);  // -> 1.25 MiB
  EXPECT_EQ(r.allocated(), mib + mib / 4);
}

// --- a hand-made replay of PyTorch issue #193400's pattern ----------------------------------------
//
// Per cycle: allocate 91 MiB and 45.5 MiB, allocate a 2 MiB block that stays alive, free the two
// large ones; 100 cycles. What the native policy does:
//  - without expandable segments, 91 MiB gets a 92 MiB segment and 45.5 MiB a 46 MiB one (neither
//    splits: 1 MiB and 0.5 MiB remain, not > 1 MiB); each 2 MiB block is carved from a 20 MiB
//    segment (1-10 MiB requests), 10 per segment. From cycle 2 on, the 91 and 45.5 MiB requests
//    reuse the two cached segments exactly (best fit: 92 >= 91, 46 >= 45.5), so reserved only
//    grows with the live 2 MiB blocks: 92 + 46 + 10 x 20 = 338 MiB, and reserved - allocated
//    stays at the 138 MiB of the two cached segments. Bounded.
//  - with expandable segments (20 MiB pages): cycle 1 maps 100 MiB for 91 MiB, 40 more for 45.5
//    MiB (after the 9 MiB remainder), and the 2 MiB block takes [136.5, 138.5) MiB. The freed
//    91 + 45.5 MiB merge into one 136.5 MiB block that the next cycle splits again, exactly; the
//    2 MiB blocks stack up after 136.5 MiB, the 100th ending at 336.5 MiB, so 340 MiB are mapped
//    (17 pages). Also bounded: growth is the live 2 MiB blocks only.

void run_issue_pattern(rig& r) {
  for (int cycle = 0; cycle < 100; ++cycle) {
    const device_address a = r.alloc(91 * mib);
    const device_address b = r.alloc(91 * mib / 2);
    (void)r.alloc(2 * mib);  // kept alive
    r.free(a);
    r.free(b);
  }
}

TEST(PytorchPolicyTest, Issue193400PatternStaysBoundedWithNativeSegments) {
  rig r("");
  run_issue_pattern(r);
  EXPECT_EQ(r.allocated(), 200 * mib);
  EXPECT_EQ(r.reserved(), 338 * mib);
  EXPECT_EQ(r.segments(), 12u);
  EXPECT_EQ(r.engine_.stats().num_device_alloc, 12);
  EXPECT_EQ(r.engine_.stats().num_ooms, 0);
}

TEST(PytorchPolicyTest, Issue193400PatternStaysBoundedWithExpandableSegments) {
  rig r("expandable_segments:True", gib, /*virtual_memory=*/true);
  run_issue_pattern(r);
  EXPECT_EQ(r.allocated(), 200 * mib);
  EXPECT_EQ(r.reserved(), 340 * mib);
  EXPECT_EQ(r.device_.mapped_bytes(), 340 * mib);
}

}  // namespace
}  // namespace phasealloc
