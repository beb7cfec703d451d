#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_path.hpp"
#include "phasealloc/trace/trace_recorder.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

using testing::make_event;

trace_record record(trace_op op, device_address addr = 0, std::size_t requested = 0, std::size_t block = 0,
                    stream_id stream = 0, std::string_view name = {}, std::uint32_t tag = 0) {
  trace_record r;
  r.op = op;
  r.addr = addr;
  r.requested_bytes = requested;
  r.block_bytes = block;
  r.stream = stream;
  r.name = name;
  r.tag = tag;
  return r;
}

class TraceRecorderTest : public ::testing::Test {
 protected:
  TraceRecorderTest() : recorder_(options()) {}
  trace_recorder_options options() {
    trace_recorder_options o;
    o.clock_ns = [this] { return clock_ns_; };
    o.allocator_settings = "expandable_segments:False";
    return o;
  }
  std::uint64_t clock_ns_ = 1'000'000;  // the origin: recorded times are relative to it
  trace_recorder recorder_;
};

TEST_F(TraceRecorderTest, TurnsAddressesIntoIdsAndHandlesIntoOrdinals) {
  const stream_id side = 0x7f00deadbeef;
  recorder_.on_event(record(trace_op::segment_alloc, 0x1000, 2 << 20, 2 << 20, 0));
  clock_ns_ += 10;
  recorder_.on_event(record(trace_op::alloc, 0x1000, 100, 512, 0, {}, 3));
  clock_ns_ += 10;
  recorder_.on_event(record(trace_op::alloc, 0x1200, 200, 512, side));
  recorder_.on_event(record(trace_op::record_stream, 0x1000, 0, 512, side));
  clock_ns_ += 5;
  recorder_.on_event(record(trace_op::free_requested, 0x1000, 100, 512, 0));
  recorder_.on_event(record(trace_op::free_completed, 0x1000, 0, 512, 0));
  // The address comes back for a new allocation: it gets a new id.
  recorder_.on_event(record(trace_op::alloc, 0x1000, 300, 512, side));
  recorder_.on_event(record(trace_op::free_requested, 0x1000, 300, 512, side));
  recorder_.on_event(record(trace_op::free_requested, 0x1200, 200, 512, side));
  recorder_.on_event(record(trace_op::segment_free, 0x1000, 2 << 20, 2 << 20, 0));

  const trace t = recorder_.take();
  EXPECT_EQ(t.meta.allocator_settings, "expandable_segments:False");
  EXPECT_EQ(t.meta.stream_count, 2U);
  const std::vector<trace_event> expected = {
      make_event(trace_event_op::segment_alloc, 0, 0, 2 << 20),
      make_event(trace_event_op::alloc, 10, 0, 100, 0, 3),
      make_event(trace_event_op::alloc, 20, 1, 200, 1),
      make_event(trace_event_op::record_stream, 20, 0, 0, 1),
      make_event(trace_event_op::free, 25, 0, 100, 0),
      make_event(trace_event_op::alloc, 25, 2, 300, 1),
      make_event(trace_event_op::free, 25, 2, 300, 1),
      make_event(trace_event_op::free, 25, 1, 200, 1),
      make_event(trace_event_op::segment_free, 25, 0, 2 << 20),
  };
  EXPECT_EQ(t.events, expected);
  const auto v = validate(t);
  EXPECT_TRUE(v.has_value()) << v.error().message();
}

TEST_F(TraceRecorderTest, RecordsThePhaseThatBecomesCurrent) {
  // The engine reports each transition as phase_end(from) + phase_begin(to).
  recorder_.on_event(record(trace_op::phase_end, 0, 0, 0, 0, "unphased"));
  recorder_.on_event(record(trace_op::phase_begin, 0, 0, 0, 0, "generation"));
  recorder_.on_event(record(trace_op::phase_end, 0, 0, 0, 0, "generation"));
  recorder_.on_event(record(trace_op::phase_begin, 0, 0, 0, 0, "training"));
  recorder_.on_event(record(trace_op::phase_end, 0, 0, 0, 0, "training"));
  recorder_.on_event(record(trace_op::phase_begin, 0, 0, 0, 0, "generation"));
  const trace t = recorder_.take();
  ASSERT_EQ(t.events.size(), 3U);
  EXPECT_EQ(t.strings, (std::vector<std::string>{"generation", "training"}));
  EXPECT_EQ(t.events[0].name, 0U);
  EXPECT_EQ(t.events[1].name, 1U);
  EXPECT_EQ(t.events[2].name, 0U);
  EXPECT_TRUE(validate(t).has_value());
}

TEST_F(TraceRecorderTest, RecordsOomEmptyCacheAndMaps) {
  recorder_.on_event(record(trace_op::oom, 0, 1 << 30, (1 << 30) + 512, 0));
  recorder_.on_event(record(trace_op::empty_cache));
  recorder_.on_event(record(trace_op::segment_map, 0x2000, 2 << 20, 2 << 20));
  recorder_.on_event(record(trace_op::segment_unmap, 0x2000, 2 << 20, 2 << 20));
  const trace t = recorder_.take();
  ASSERT_EQ(t.events.size(), 4U);
  EXPECT_EQ(t.events[0], make_event(trace_event_op::oom, 0, 0, 1 << 30));
  EXPECT_EQ(t.events[1].op, trace_event_op::empty_cache);
  EXPECT_EQ(t.events[2], make_event(trace_event_op::segment_map, 0, 0, 2 << 20));
  EXPECT_EQ(t.events[3], make_event(trace_event_op::segment_unmap, 0, 0, 2 << 20));
}

TEST_F(TraceRecorderTest, CountsFreesOfUnknownAddresses) {
  recorder_.on_event(record(trace_op::free_requested, 0x9000, 10, 512));
  recorder_.on_event(record(trace_op::record_stream, 0x9000, 0, 512, 5));
  recorder_.on_event(record(trace_op::segment_free, 0x9000, 0, 2 << 20));
  EXPECT_EQ(recorder_.unmatched_events(), 3U);
  EXPECT_EQ(recorder_.event_count(), 0U);
}

TEST_F(TraceRecorderTest, TimeNeverGoesBackwards) {
  clock_ns_ += 100;
  recorder_.on_event(record(trace_op::empty_cache));
  clock_ns_ -= 50;  // a clock that misbehaves
  recorder_.on_event(record(trace_op::empty_cache));
  const trace t = recorder_.take();
  EXPECT_EQ(t.events[0].time_ns, 100U);
  EXPECT_EQ(t.events[1].time_ns, 100U);
}

TEST_F(TraceRecorderTest, TakeStartsOver) {
  recorder_.on_event(record(trace_op::alloc, 0x10, 1, 512, 77));
  EXPECT_EQ(recorder_.take().events.size(), 1U);
  clock_ns_ += 1000;
  recorder_.on_event(record(trace_op::alloc, 0x20, 2, 512, 88));
  const trace t = recorder_.take();
  ASSERT_EQ(t.events.size(), 1U);
  EXPECT_EQ(t.events[0], make_event(trace_event_op::alloc, 1000, 0, 2, 1)) << "the clock origin moved to take()";
}

TEST_F(TraceRecorderTest, FlushWritesALoadableTraceAndKeepsRecording) {
  recorder_.on_event(record(trace_op::alloc, 0x10, 1, 512, 0));
  const auto path = std::filesystem::temp_directory_path() / "phasealloc_recorder_flush_test.patrace";
  ASSERT_TRUE(recorder_.flush_to(path).has_value());
  recorder_.on_event(record(trace_op::free_requested, 0x10, 1, 512, 0));
  const auto loaded = load_trace(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message();
  EXPECT_EQ(loaded.value().events.size(), 1U);
  EXPECT_EQ(loaded.value().meta.source, "phasealloc recorder");
  EXPECT_EQ(recorder_.event_count(), 2U);
}

TEST(TraceRecorderClockTest, DefaultsToASteadyClock) {
  trace_recorder recorder;
  recorder.on_event(record(trace_op::empty_cache));
  recorder.on_event(record(trace_op::empty_cache));
  const trace t = recorder.take();
  ASSERT_EQ(t.events.size(), 2U);
  EXPECT_LE(t.events[0].time_ns, t.events[1].time_ns);
  EXPECT_LT(t.events[1].time_ns, 60ULL * 1'000'000'000ULL);
}

// --- expand_trace_path ----------------------------------------------------------------------------

TEST(TracePathTest, ExpandsPidRankAndPercent) {
  const trace_path_context ctx{4242, 3};
  EXPECT_EQ(expand_trace_path("trace.%r.%p.patrace", ctx), "trace.3.4242.patrace");
  EXPECT_EQ(expand_trace_path("100%%-%r", ctx), "100%-3");
  EXPECT_EQ(expand_trace_path("keep %x and %", ctx), "keep %x and %");
  EXPECT_EQ(expand_trace_path("%%p", ctx), "%p");
  EXPECT_EQ(expand_trace_path("", ctx), "");
}

TEST(TracePathTest, RankComesFromRankThenLocalRank) {
  ::setenv("RANK", "5", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  EXPECT_EQ(current_trace_path_context().rank, 5);
  ::setenv("RANK", "not-a-number", 1);
  EXPECT_EQ(current_trace_path_context().rank, 1);
  ::unsetenv("RANK");
  ::unsetenv("LOCAL_RANK");
  EXPECT_EQ(current_trace_path_context().rank, 0);
  EXPECT_EQ(current_trace_path_context().pid, static_cast<std::int64_t>(::getpid()));
  EXPECT_EQ(expand_trace_path("r%r"), "r0");
}

}  // namespace
}  // namespace phasealloc
