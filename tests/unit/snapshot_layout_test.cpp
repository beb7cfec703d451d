// A snapshot that does not start from an empty allocator seeds the `pytorch`
// model with the segments and blocks it recorded (mid-run and state-only snapshots), and bad
// layouts are errors naming the block.
#include <gtest/gtest.h>

#include "phasealloc/export/pickle_writer.hpp"
#include "phasealloc/import/snapshot_importer.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "snapshot_test_support.hpp"

namespace phasealloc {
namespace {

constexpr std::int64_t mb = std::int64_t{1} << 20;
constexpr std::int64_t seg_a = std::int64_t{1} << 32;
constexpr std::int64_t seg_b = std::int64_t{2} << 32;
constexpr std::int64_t seg_c = std::int64_t{3} << 32;

trace import_ok(const std::string& bytes) {
  auto r = import_snapshot(std::string_view(bytes), "layout.pickle");
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message());
  return r ? std::move(r).value() : trace{};
}

replay_result replay_ok(const trace& t, std::string_view spec, std::optional<bool> layout = std::nullopt) {
  replay_options options;
  options.check_invariants = true;
  options.use_recorded_layout = layout;
  auto r = replay(t, spec, options);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error());
  return r ? std::move(r).value() : replay_result{};
}

// State only: a 20 MiB segment split into an 8 MiB tensor and a 12 MiB cached block, and a 40 MiB
// cached free segment. The pytorch model holds exactly what was reserved: 60 MiB in 2 segments.
TEST(SnapshotLayoutTest, StateOnlySnapshotReportsWhatWasReserved) {
  const std::vector<testing::snap_segment> segments = {
      {0, seg_a, 0, {{8 * mb, 8 * mb - 100, "active_allocated"}, {12 * mb, 0, "inactive"}}},
      {0, seg_b, 0, {{40 * mb, 0, "inactive"}}}};
  const trace t = import_ok(testing::make_snapshot(segments, {{}}));
  ASSERT_TRUE(validate(t).has_value()) << validate(t).error().message();
  EXPECT_EQ(t.version, trace_format_version_layout);
  EXPECT_EQ(*find_property(t.meta, "import.layout"), "used: 2 segments");
  const replay_result r = replay_ok(t, "pytorch");
  EXPECT_EQ(r.seeded_segments, 2U);
  EXPECT_EQ(r.peak_reserved_bytes, 60U * mb);
  EXPECT_EQ(r.final_segments, 2U);
  EXPECT_EQ(r.final_allocated_bytes, 8U * mb);
  EXPECT_EQ(r.final_requested_bytes, 8U * mb - 100);
  EXPECT_FALSE(r.recorded.first_divergence.has_value());
  // Without the layout the live set alone is placed: one 20 MiB segment, the cache is lost.
  EXPECT_EQ(replay_ok(t, "pytorch", false).peak_reserved_bytes, 20U * mb);
  // Other policies place the same live set their own way.
  EXPECT_EQ(replay_ok(t, "phasealloc").final_requested_bytes, 8U * mb - 100);
}

// Mid-run: the history starts with segments A and B live (B holding a 4 MiB tensor it frees), then
// allocates 4 MiB (into A's cached block) and 50 MiB (a new segment C). The recorded peak is 110 MiB.
TEST(SnapshotLayoutTest, MidRunSnapshotStartsFromTheRecordedSegments) {
  const std::vector<testing::snap_segment> end_state = {
      {0, seg_a, 0, {{8 * mb, 8 * mb, "active_allocated"}, {4 * mb, 4 * mb, "active_allocated"}, {8 * mb, 0, "inactive"}}},
      {0, seg_b, 0, {{40 * mb, 0, "inactive"}}},
      {0, seg_c, 0, {{50 * mb, 50 * mb, "active_allocated"}}}};
  const std::vector<testing::snap_entry> history = {
      {"alloc", seg_a + 8 * mb, 4 * mb},
      {"free_requested", seg_b, 4 * mb},
      {"free_completed", seg_b, 4 * mb},
      {"segment_alloc", seg_c, 50 * mb},
      {"alloc", seg_c, 50 * mb}};
  const trace t = import_ok(testing::make_snapshot(end_state, {history}));
  ASSERT_TRUE(validate(t).has_value()) << validate(t).error().message();
  EXPECT_EQ(summarize(t).initial_reserved_bytes, 60U * mb);
  EXPECT_EQ(summarize(t).peak_reserved_bytes, 110U * mb);
  const replay_result r = replay_ok(t, "pytorch");
  EXPECT_EQ(r.peak_reserved_bytes, 110U * mb);  // to the byte
  EXPECT_EQ(r.final_segments, 3U);
  EXPECT_EQ(r.recorded.recorded_final_segments, 3U);
  EXPECT_EQ(r.device_allocs, 1) << "only segment C is made during the history";
  EXPECT_FALSE(r.recorded.first_divergence.has_value());
  // From an empty allocator the model re-creates the start its own way and ends elsewhere.
  const replay_result plain = replay_ok(t, "pytorch", false);
  EXPECT_NE(plain.peak_reserved_bytes, 110U * mb);
  EXPECT_TRUE(plain.recorded.first_divergence.has_value());
}

// Expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): a state-only snapshot of
// one 20 MiB mapped range, an 8 MiB tensor and 12 MiB cached, seeds the expandable model as one
// reservation. A 10 MiB request then fits the cached block (no device call); a 30 MiB one grows the
// same reservation: the 2 MiB left free plus two 20 MiB pages mapped after it (no new reservation).
TEST(SnapshotLayoutTest, ExpandableSegmentsSeedOneReservationThatGrowsInPlace) {
  std::vector<testing::snap_segment> segments = {
      {0, seg_a, 0, {{8 * mb, 8 * mb, "active_allocated"}, {12 * mb, 0, "inactive"}}}};
  segments[0].expandable = true;
  const trace state_only = import_ok(testing::make_snapshot(segments, {{}}));
  ASSERT_TRUE(validate(state_only).has_value()) << validate(state_only).error().message();
  const replay_result r = replay_ok(state_only, "pytorch:expandable_segments:True");
  EXPECT_EQ(r.seeded_segments, 1U);
  EXPECT_EQ(r.peak_reserved_bytes, 20U * mb);
  EXPECT_EQ(r.final_allocated_bytes, 8U * mb);

  // The same start, with a history: 10 MiB into the cached block, then 30 MiB more.
  std::vector<testing::snap_segment> end_state = {
      {0, seg_a, 0, {{8 * mb, 8 * mb, "active_allocated"}, {10 * mb, 10 * mb, "active_allocated"},
                     {30 * mb, 30 * mb, "active_allocated"}, {12 * mb, 0, "inactive"}}}};
  end_state[0].expandable = true;
  const std::vector<testing::snap_entry> history = {
      {"alloc", seg_a + 8 * mb, 10 * mb},
      {"segment_map", seg_a + 20 * mb, 40 * mb},
      {"alloc", seg_a + 18 * mb, 30 * mb}};
  const trace t = import_ok(testing::make_snapshot(end_state, {history}));
  ASSERT_TRUE(validate(t).has_value()) << validate(t).error().message();
  EXPECT_EQ(summarize(t).initial_reserved_bytes, 20U * mb);
  const replay_result grown = replay_ok(t, "pytorch:expandable_segments:True");
  EXPECT_EQ(grown.peak_reserved_bytes, 60U * mb);  // 20 MiB seeded + two 20 MiB pages after it
  EXPECT_EQ(grown.device_allocs, 0) << "no new reservation: the seeded one grows";
  EXPECT_EQ(grown.device_maps, 1);
  EXPECT_FALSE(grown.recorded.first_divergence.has_value());
}

// A block that runs past its segment is an error naming it.
TEST(SnapshotLayoutTest, ABlockOutsideItsSegmentIsAnErrorNamingIt) {
  pickle_writer w;
  w.begin_list();
  w.begin_dict();
  w.str("device");
  w.integer(0);
  w.str("address");
  w.integer(seg_a);
  w.str("total_size");
  w.integer(2 * mb);
  w.str("stream");
  w.integer(0);
  w.str("blocks");
  w.begin_list();
  for (const std::int64_t offset : {std::int64_t{0}, mb / 2}) {  // the second overlaps the first
    w.begin_dict();
    w.str("address");
    w.integer(seg_a + offset);
    w.str("size");
    w.integer(mb);
    w.str("state");
    w.str("active_allocated");
    w.str("requested_size");
    w.integer(mb);
    w.end_dict();
  }
  w.end_list();
  w.end_dict();
  w.end_list();
  const auto r = import_snapshot(std::string_view(w.finish()), "overlap.pickle");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("segments[0]['blocks'][1]: a block inside its segment"), std::string::npos)
      << r.error().message();
  EXPECT_NE(r.error().message().find("a block of 1048576 bytes at 0x100080000"), std::string::npos)
      << r.error().message();
}

}  // namespace
}  // namespace phasealloc
