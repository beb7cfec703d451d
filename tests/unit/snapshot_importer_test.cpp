#include <gtest/gtest.h>

#include <filesystem>

#include "phasealloc/export/pickle_writer.hpp"
#include "phasealloc/import/snapshot_importer.hpp"
#include "phasealloc/trace/trace_binary.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "snapshot_test_support.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

using testing::make_event;
using testing::make_snapshot;
using testing::snap_block;
using testing::snap_entry;
using testing::snap_options;
using testing::snap_segment;

std::string prop(const trace& t, std::string_view key) {
  const std::string* v = find_property(t.meta, key);
  return v == nullptr ? "<absent>" : *v;
}

// These tests check the version 1 shape of an import (seeded segments and allocations); the
// recorded layout has its own tests (snapshot_layout_test.cpp).
snapshot_import_options plain(snapshot_import_options options = {}) {
  options.recorded_layout = false;
  return options;
}

trace import_ok(const std::string& bytes, const snapshot_import_options& options = {}) {
  auto r = import_snapshot(std::string_view(bytes), "synthetic.pickle", plain(options));
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message());
  if (!r) return {};
  const auto v = validate(r.value());
  EXPECT_TRUE(v.has_value()) << (v ? "" : v.error().message());
  return std::move(r).value();
}

std::vector<std::uint64_t> segment_alloc_sizes(const trace& t) {
  std::vector<std::uint64_t> sizes;
  for (const auto& e : t.events) {
    if (e.op == trace_event_op::segment_alloc && (e.flags & trace_flag::seeded) == 0) sizes.push_back(e.bytes);
  }
  return sizes;
}

// --- the three real snapshots in /work/shared/traces ----------------------------------------------

class RealSnapshotTest : public ::testing::Test {
 protected:
  trace load(std::string_view name) {
#ifndef PHASEALLOC_SHARED_TRACES_DIR
    ADD_FAILURE() << "PHASEALLOC_SHARED_TRACES_DIR is not defined";
    return {};
#else
    const auto path = std::filesystem::path(PHASEALLOC_SHARED_TRACES_DIR) / name;
    auto r = import_snapshot_file(path, plain());
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message());
    if (!r) return {};
    const auto v = validate(r.value());
    EXPECT_TRUE(v.has_value()) << "every free matches a live allocation: " << (v ? "" : v.error().message());
    // And the imported trace survives the binary codec.
    EXPECT_EQ(decode_trace(encode_trace(r.value()), "re-encoded").value(), r.value());
    return std::move(r).value();
#endif
  }

  void SetUp() override {
#ifdef PHASEALLOC_SHARED_TRACES_DIR
    ASSERT_TRUE(std::filesystem::is_directory(PHASEALLOC_SHARED_TRACES_DIR))
        << "the real snapshots are not here: " << PHASEALLOC_SHARED_TRACES_DIR
        << " (they ship in tests/data/snapshots; PHASEALLOC_SHARED_TRACES_DIR names another folder)";
#else
    FAIL() << "built without PHASEALLOC_SHARED_TRACES_DIR";
#endif
  }
};

// From an empty allocator: PyTorch's own segment decisions are all visible.
TEST_F(RealSnapshotTest, FromEmptySnapshotKeepsEverySegmentAlloc) {
  const trace t = load("cs336_mem_snapshot.pickle");
  EXPECT_EQ(prop(t, "pytorch.layout"), "current");
  EXPECT_EQ(prop(t, "pytorch.trace_entries"), "97");
  EXPECT_EQ(prop(t, "import.seeded_allocs"), "0");
  EXPECT_EQ(prop(t, "import.seeded_segments"), "0");
  EXPECT_EQ(prop(t, "import.implicit_frees"), "0");
  EXPECT_EQ(prop(t, "import.reserved_at_end_bytes"), "3781165056");
  EXPECT_EQ(prop(t, "pytorch.deferred_frees"), "0");
  EXPECT_EQ(prop(t, "pytorch.expandable_segments"), "False");
  EXPECT_EQ(prop(t, "pytorch.max_split_size"), "-1");
  EXPECT_EQ(t.meta.allocator_settings, "");
  EXPECT_EQ(t.meta.stream_count, 1U);
  EXPECT_EQ(t.events.size(), 71U);  // 36 alloc + 26 free_requested + 9 segment_alloc

  const trace_summary s = summarize(t);
  EXPECT_EQ(s.allocs, 36U);
  EXPECT_EQ(s.frees, 26U);
  EXPECT_EQ(s.segment_allocs, 9U);
  EXPECT_EQ(s.segment_frees, 0U);
  EXPECT_EQ(s.initial_reserved_bytes, 0U);
  EXPECT_EQ(s.peak_reserved_bytes, 3781165056U);
  EXPECT_EQ(s.final_reserved_bytes, 3781165056U);
  EXPECT_EQ(s.peak_live_bytes, 3249143816U);
  EXPECT_EQ(s.final_live_bytes, 31719428U);
  EXPECT_EQ(s.duration_ns, 970161000U);  // the last free_requested; the last entry (free_completed, 1 us later) is not kept
  const std::vector<std::uint64_t> expected_segments = {20971520,  536870912, 536870912, 2097152,  536870912,
                                                        536870912, 536870912, 536870912, 536870912};
  EXPECT_EQ(segment_alloc_sizes(t), expected_segments);
  // The first device call, then the first allocation 2 us later.
  EXPECT_EQ(t.events[0], make_event(trace_event_op::segment_alloc, 0, 0, 20971520));
  EXPECT_EQ(t.events[1], make_event(trace_event_op::alloc, 2000, 0, 2097152));
}

// Mid-run: segments and 137 blocks pre-exist; they are seeded first, at time 0.
TEST_F(RealSnapshotTest, MidRunBf16SeedsPreexistingBlocks) {
  const trace t = load("cs336_memory_forward_bf16_128.pickle");
  EXPECT_EQ(prop(t, "pytorch.trace_entries"), "2811");
  EXPECT_EQ(prop(t, "import.seeded_allocs"), "137");
  EXPECT_EQ(prop(t, "import.seeded_segments"), "43");
  EXPECT_EQ(prop(t, "pytorch.deferred_frees"), "0");
  EXPECT_EQ(prop(t, "import.reserved_at_end_bytes"), "861929472");
  EXPECT_EQ(t.events.size(), 43U + 137U + 937U * 2);
  const trace_summary s = summarize(t);
  EXPECT_EQ(s.seeded_allocs, 137U);
  EXPECT_EQ(s.allocs, 137U + 937U);
  EXPECT_EQ(s.frees, 937U);
  EXPECT_EQ(s.seeded_live_bytes, 523811840U);
  EXPECT_EQ(s.peak_live_bytes, 779837440U);
  EXPECT_EQ(s.final_live_bytes, 523811840U);
  EXPECT_EQ(s.segment_allocs, 0U);
  EXPECT_EQ(s.seeded_segments, 43U);
  EXPECT_EQ(s.initial_reserved_bytes, 861929472U);
  EXPECT_EQ(s.peak_reserved_bytes, 861929472U);
  EXPECT_EQ(s.duration_ns, 15781000U);
  // Seeds come first: 43 segments, then 137 allocations, all at time 0, in address order.
  for (std::size_t i = 0; i < 180; ++i) {
    EXPECT_EQ(t.events[i].time_ns, 0U);
    EXPECT_EQ(t.events[i].flags, trace_flag::seeded);
    EXPECT_EQ(t.events[i].op, i < 43 ? trace_event_op::segment_alloc : trace_event_op::alloc);
  }
  EXPECT_EQ(t.events[180].flags, 0);
  EXPECT_EQ(t.events[180].alloc_id, 137U) << "recorded allocations are numbered after the seeds";
}

TEST_F(RealSnapshotTest, MidRunFp32SeedsPreexistingBlocks) {
  const trace t = load("cs336_memory_forward_fp32_128.pickle");
  EXPECT_EQ(prop(t, "pytorch.trace_entries"), "2043");
  EXPECT_EQ(t.events.size(), 29U + 137U + 681U * 2);
  const trace_summary s = summarize(t);
  EXPECT_EQ(s.seeded_allocs, 137U);
  EXPECT_EQ(s.frees, 681U);
  EXPECT_EQ(s.seeded_live_bytes, 523811840U);
  EXPECT_EQ(s.peak_live_bytes, 556843008U);
  EXPECT_EQ(s.seeded_segments, 29U);
  EXPECT_EQ(s.initial_reserved_bytes, 610271232U);
  EXPECT_EQ(s.peak_reserved_bytes, 610271232U);
  EXPECT_EQ(s.duration_ns, 12306000U);
}

TEST_F(RealSnapshotTest, FrameRulesFindTheForwardPass) {
#ifdef PHASEALLOC_SHARED_TRACES_DIR
  snapshot_import_options options;
  options.phase_rules = {{"forward", "transformer_lm.py"}};
  const auto r = import_snapshot_file(std::filesystem::path(PHASEALLOC_SHARED_TRACES_DIR) /
                                          "cs336_memory_forward_bf16_128.pickle",
                                      options);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(prop(r.value(), "import.phase_source"), "frame_rules");
  EXPECT_EQ(r.value().strings, std::vector<std::string>{"forward"});
  EXPECT_EQ(summarize(r.value()).phase_changes, 1U);
  EXPECT_TRUE(validate(r.value()).has_value());
#endif
}

// --- synthetic snapshots: every rule, one at a time ------------------------------------------------

TEST(SnapshotImporterTest, SeedsFreesOfUnknownAddresses) {
  const trace t = import_ok(make_snapshot(
      {}, {{{"alloc", 0x2000, 64, 0, 100}, {"free_requested", 0x1000, 100, 0, 101}, {"free_requested", 0x2000, 64, 0, 102}}}));
  ASSERT_EQ(t.events.size(), 4U);
  EXPECT_EQ(t.events[0], make_event(trace_event_op::alloc, 0, 0, 100, 0, 0, 0, trace_flag::seeded));
  EXPECT_EQ(t.events[1], make_event(trace_event_op::alloc, 0, 1, 64));
  EXPECT_EQ(t.events[2], make_event(trace_event_op::free, 1000, 0, 100));
  EXPECT_EQ(t.events[3], make_event(trace_event_op::free, 2000, 1, 64));
  EXPECT_EQ(prop(t, "import.seeded_allocs"), "1");
}

TEST(SnapshotImporterTest, SeedsBlocksLiveAtTheEndButNotInTheTrace) {
  const std::vector<snap_segment> segments = {
      {0, 0x10000, 0, {{512, 500, "active_allocated"}, {1024, 0, "inactive"}, {2048, 2000, "active_allocated"}}}};
  // The trace allocated the block at 0x10600 (still live): only 0x10000 needs a seed.
  const trace t = import_ok(make_snapshot(segments, {{{"alloc", 0x10600, 2000, 0, 5}}}));
  ASSERT_EQ(t.events.size(), 3U);
  EXPECT_EQ(t.events[0], make_event(trace_event_op::segment_alloc, 0, 0, 3584, 0, 0, 0, trace_flag::seeded));
  EXPECT_EQ(t.events[1], make_event(trace_event_op::alloc, 0, 0, 500, 0, 0, 0, trace_flag::seeded));
  EXPECT_EQ(t.events[2], make_event(trace_event_op::alloc, 0, 1, 2000));
  EXPECT_EQ(prop(t, "import.reserved_at_end_bytes"), "3584");
}

TEST(SnapshotImporterTest, ReadsLegacyBlocksAndMissingTimes) {
  snap_options legacy;
  legacy.legacy_blocks = true;
  legacy.with_settings = false;
  const std::vector<snap_segment> segments = {{0, 0x4000, 0, {{1024, 1000, "active_allocated"}, {512, 0, "inactive"}}}};
  snap_entry alloc{"alloc", 0x4400, 300};
  snap_entry free{"free_requested", 0x4400, 300};
  const trace t = import_ok(make_snapshot(segments, {{alloc, free}}, legacy));
  EXPECT_EQ(prop(t, "pytorch.layout"), "2.0");
  ASSERT_EQ(t.events.size(), 4U);
  EXPECT_EQ(t.events[1], make_event(trace_event_op::alloc, 0, 0, 1000, 0, 0, 0, trace_flag::seeded));
  EXPECT_EQ(t.events[3], make_event(trace_event_op::free, 0, 1, 300));
}

TEST(SnapshotImporterTest, TreatsABareListAsSegments) {
  pickle_writer w;
  w.begin_list();
  testing::write_segment(w, {0, 0x8000, 0, {{512, 100, "active_allocated"}, {512, 200, "active_pending_free"}}}, {});
  w.end_list();
  const trace t = import_ok(w.finish());
  EXPECT_EQ(prop(t, "pytorch.layout"), "segments-only");
  ASSERT_EQ(t.events.size(), 2U);
  EXPECT_EQ(t.events[1], make_event(trace_event_op::alloc, 0, 0, 100, 0, 0, 0, trace_flag::seeded));
}

TEST(SnapshotImporterTest, MapsSegmentsOomAndStreams) {
  const std::int64_t side = 0x55d0c8a1f2b0;
  const trace t = import_ok(make_snapshot(
      {}, {{{"segment_alloc", 0x100000, 2 << 20, side, 10},
            {"alloc", 0x100000, 700, side, 11},
            {"free_requested", 0x100000, 700, side, 12},
            {"free_completed", 0x100000, 700, side, 13},
            {"segment_free", 0x100000, 2 << 20, side, 14},
            {"segment_free", 0x900000, 4 << 20, 0, 15},  // allocated before recording: seeded
            {"oom", 0, 1 << 30, 0, 16},
            {"snapshot", 0, 0, 0, 17},
            {"annotate", 0, 0, 0, 18}}}));
  EXPECT_EQ(t.meta.stream_count, 2U);
  const std::vector<trace_event> expected = {
      make_event(trace_event_op::segment_alloc, 0, 0, 4 << 20, 0, 0, 0, trace_flag::seeded),
      make_event(trace_event_op::segment_alloc, 0, 1, 2 << 20, 1),
      make_event(trace_event_op::alloc, 1000, 0, 700, 1),
      make_event(trace_event_op::free, 2000, 0, 700, 1),
      make_event(trace_event_op::segment_free, 4000, 1, 2 << 20, 1),
      make_event(trace_event_op::segment_free, 5000, 0, 4 << 20, 0),
      make_event(trace_event_op::oom, 6000, 0, 1 << 30, 0),
  };
  EXPECT_EQ(t.events, expected);
  EXPECT_EQ(prop(t, "import.ignored_actions"), "1");
}

TEST(SnapshotImporterTest, CountsFreesThatDidNotCompleteAtOnce) {
  const trace t = import_ok(make_snapshot({}, {{{"alloc", 0x10, 8, 0, 1},
                                                {"alloc", 0x20, 8, 0, 2},
                                                {"free_requested", 0x10, 8, 0, 3},
                                                {"alloc", 0x30, 8, 0, 4},
                                                {"free_completed", 0x10, 8, 0, 5},  // deferred
                                                {"free_requested", 0x30, 8, 0, 6},
                                                {"free_completed", 0x30, 8, 0, 6},  // at once
                                                {"free_requested", 0x20, 8, 0, 7}}}));  // never completed
  EXPECT_EQ(prop(t, "pytorch.deferred_frees"), "2");
  EXPECT_EQ(summarize(t).frees, 3U) << "the caller's free is the event, completed or not";
}

TEST(SnapshotImporterTest, LostFreeBecomesAnImplicitFree) {
  const trace t = import_ok(make_snapshot({}, {{{"alloc", 0x10, 8, 0, 1}, {"alloc", 0x10, 16, 0, 2}}}));
  ASSERT_EQ(t.events.size(), 3U);
  EXPECT_EQ(t.events[1], make_event(trace_event_op::free, 1000, 0, 8));
  EXPECT_EQ(prop(t, "import.implicit_frees"), "1");
}

TEST(SnapshotImporterTest, ClampsTimeThatGoesBackwards) {
  const trace t = import_ok(make_snapshot({}, {{{"alloc", 0x10, 8, 0, 50}, {"alloc", 0x20, 8, 0, 40}}}));
  EXPECT_EQ(t.events[1].time_ns, 0U);
  EXPECT_EQ(prop(t, "import.clamped_times"), "1");
}

TEST(SnapshotImporterTest, UserMetadataStartsPhases) {
  snap_entry a{"alloc", 0x10, 8, 0, 1};
  a.user_metadata = "generation";
  snap_entry b{"alloc", 0x20, 8, 0, 2};
  b.user_metadata = "generation";
  snap_entry c{"free_requested", 0x10, 8, 0, 3};
  c.user_metadata = "training";
  snap_entry d{"free_requested", 0x20, 8, 0, 4};  // no user_metadata: the phase stays
  snapshot_import_options options;
  options.phase_rules = {{"ignored", "x"}};  // user_metadata wins over rules
  const trace t = import_ok(make_snapshot({}, {{a, b, c, d}}), options);
  EXPECT_EQ(prop(t, "import.phase_source"), "user_metadata");
  EXPECT_EQ(t.strings, (std::vector<std::string>{"generation", "training"}));
  ASSERT_EQ(t.events.size(), 6U);
  EXPECT_EQ(t.events[0], make_event(trace_event_op::phase, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(t.events[3], make_event(trace_event_op::phase, 2000, 0, 0, 0, 0, 1));
}

TEST(SnapshotImporterTest, FrameRulesPickTheFirstMatchingFrame) {
  snap_entry fwd{"alloc", 0x10, 8, 0, 1, {"unwind", "model.forward", "train_step"}};
  snap_entry bwd{"alloc", 0x20, 8, 0, 2, {"unwind", "autograd::backward", "train_step"}};
  snap_entry none{"alloc", 0x30, 8, 0, 3, {"unwind"}};
  snap_entry step{"alloc", 0x40, 8, 0, 4, {"Adam.step", "train_step"}};
  snapshot_import_options options;
  options.phase_rules = {{"training", "train_step"}, {"optimizer", "Adam.step"}, {"forward", "forward"},
                         {"backward", "backward"}};
  const trace t = import_ok(make_snapshot({}, {{fwd, bwd, none, step}}), options);
  EXPECT_EQ(prop(t, "import.phase_source"), "frame_rules");
  // Innermost frame first: model.forward beats train_step; Adam.step matches "optimizer".
  EXPECT_EQ(t.strings, (std::vector<std::string>{"forward", "backward", "optimizer"}));
  EXPECT_EQ(summarize(t).phase_changes, 3U);
}

TEST(SnapshotImporterTest, PicksTheFirstDeviceWithEntries) {
  const std::vector<snap_segment> segments = {{0, 0x1000, 0, {{512, 512, "active_allocated"}}},
                                              {1, 0x9000, 0, {{512, 256, "active_allocated"}}}};
  const std::string bytes = make_snapshot(segments, {{}, {{"alloc", 0x9200, 64, 0, 1}}});
  const trace t = import_ok(bytes);
  EXPECT_EQ(prop(t, "pytorch.device"), "1");
  EXPECT_EQ(summarize(t).seeded_live_bytes, 256U);
  snapshot_import_options zero;
  zero.device = 0;
  EXPECT_EQ(summarize(import_ok(bytes, zero)).seeded_live_bytes, 512U);
}

TEST(SnapshotImporterTest, RecordsAllocatorSettings) {
  snap_options o;
  o.alloc_conf = "expandable_segments:True";
  const trace t = import_ok(make_snapshot({}, {{}}, o));
  EXPECT_EQ(t.meta.allocator_settings, "expandable_segments:True");
  EXPECT_EQ(prop(t, "pytorch.roundup_power2_divisions"), "1:0,2:4");
  EXPECT_EQ(prop(t, "pytorch.garbage_collection_threshold"), "0");
  EXPECT_NE(t.meta.source.find("synthetic.pickle"), std::string::npos);
}

TEST(SnapshotImporterTest, ErrorsNameThePathAndOffset) {
  pickle_writer w;
  w.begin_dict();
  w.str("device_traces");
  w.begin_list();
  w.begin_list();
  w.begin_dict();
  w.str("action");
  w.str("alloc");
  w.str("addr");
  w.str("0x10");  // a str where an int belongs
  w.str("size");
  w.integer(1);
  w.end_dict();
  w.end_list();
  w.end_list();
  w.end_dict();
  const std::string bytes = w.finish();
  const auto r = import_snapshot(std::string_view(bytes), "bad.pickle");
  ASSERT_FALSE(r.has_value());
  EXPECT_GT(r.error().offset, 0U);
  const std::string m = r.error().message();
  EXPECT_NE(m.find("bad.pickle: byte"), std::string::npos) << m;
  EXPECT_NE(m.find("device_traces[0][0]['addr']: an int"), std::string::npos) << m;
  EXPECT_NE(m.find("str '0x10'"), std::string::npos) << m;

  pickle_writer n;
  n.integer(5);
  const std::string number = n.finish();
  EXPECT_NE(import_snapshot(std::string_view(number), "n").error().message().find("a dict with 'segments'"),
            std::string::npos);
}

TEST(SnapshotImporterTest, RefusesCodeInTheFile) {
  const std::string evil("\x80\x02" "cposix\nsystem\n(X\x02\x00\x00\x00" "idtR.", 27);
  const auto r = import_snapshot(std::string_view(evil), "evil.pickle");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("global 'posix.system'"), std::string::npos) << r.error().message();
  const auto missing = import_snapshot_file("/nonexistent/snapshot.pickle");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("/nonexistent/snapshot.pickle"), std::string::npos);
}

}  // namespace
}  // namespace phasealloc
