// Unit tests of the engine on the model device with the basic policy.
#include "phasealloc/engine.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/policies/basic_policy.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;

/// Whether the device has memory behind every byte of [addr, addr+bytes) (granule-aligned query).
bool mapped(const model_device& d, device_address addr, std::size_t bytes) {
  const std::size_t g = d.caps().granularity_bytes;
  const device_address lo = addr / g * g;
  return d.is_mapped(lo, round_up(addr + bytes, g) - lo);
}

engine_options strict_options() {
  engine_options o;
  o.strict = true;
  o.check_invariants = true;
  return o;
}

struct recording_sink final : trace_sink {
  std::vector<trace_record> records;
  std::vector<std::string> names;
  void on_event(const trace_record& r) noexcept override {
    records.push_back(r);
    names.emplace_back(r.name);
  }
  std::size_t count(trace_op op) const {
    return static_cast<std::size_t>(std::count_if(records.begin(), records.end(), [&](auto& r) { return r.op == op; }));
  }
};

class EngineTest : public ::testing::Test {
 protected:
  model_device device_{model_device_config{.capacity_bytes = 256 * mib}};
  basic_policy policy_;
  engine engine_{device_, policy_, strict_options()};

  device_address must_allocate(std::size_t bytes, stream_id stream = 0) {
    auto r = engine_.allocate(bytes, stream);
    EXPECT_TRUE(r.has_value()) << (r ? "" : format_oom_report(r.error().report));
    return r.value_or(0);
  }
};

TEST_F(EngineTest, AllocatesRoundedBlocksAndCountsThemLikeTorch) {
  const device_address a = must_allocate(1000);
  const device_stats s = engine_.stats();
  EXPECT_EQ(s.allocated_bytes[stat_type::all].current, 1024);
  EXPECT_EQ(s.allocated_bytes[stat_type::small_pool].current, 1024);
  EXPECT_EQ(s.requested_bytes[stat_type::all].current, 1000);
  EXPECT_EQ(s.reserved_bytes[stat_type::all].current, static_cast<std::int64_t>(2 * mib));
  EXPECT_EQ(s.segment[stat_type::all].current, 1);
  EXPECT_EQ(s.num_device_alloc, 1);
  EXPECT_TRUE(mapped(device_, a, 1024));
  EXPECT_EQ(engine_.deallocate(a, 1000), errc::ok);
  EXPECT_EQ(engine_.stats().allocated_bytes[stat_type::all].current, 0);
  EXPECT_EQ(engine_.stats().allocated_bytes[stat_type::all].peak, 1024);
}

// A caller that sizes requests its own way (the c10 bridge under PyTorch's roundup_power2_divisions)
// gets a block of at least its size, while the books keep the request's own size.
TEST_F(EngineTest, AMinimumBlockSizeShapesTheBlockButNotTheRequest) {
  const std::size_t bytes = 3 * mib + 1;
  recording_sink sink;
  engine_.set_trace_sink(&sink);
  const device_address a = engine_.allocate(bytes, 0, 0, 8 * mib).value();
  EXPECT_EQ(engine_.stats().allocated_bytes[stat_type::all].current, static_cast<std::int64_t>(8 * mib));
  EXPECT_EQ(engine_.stats().requested_bytes[stat_type::all].current, static_cast<std::int64_t>(bytes));
  EXPECT_EQ(sink.records.back().op, trace_op::alloc);
  EXPECT_EQ(sink.records.back().requested_bytes, bytes);
  EXPECT_EQ(sink.records.back().block_bytes, 8 * mib);
  EXPECT_EQ(engine_.deallocate(a, bytes), errc::ok);  // a free names the request's size
  // The same request without the minimum is the policy's own size (no answer reused from above;
  // the cached 8 MiB block is split, as the basic policy splits more than 1 MiB off).
  const device_address b = engine_.allocate(bytes, 0).value();
  EXPECT_EQ(engine_.stats().allocated_bytes[stat_type::all].current, static_cast<std::int64_t>(round_up(bytes, 512)));
  EXPECT_EQ(engine_.deallocate(b, bytes), errc::ok);
  // A minimum below the request changes nothing.
  const device_address c = engine_.allocate(bytes, 0, 0, 1 * mib).value();
  EXPECT_EQ(engine_.stats().allocated_bytes[stat_type::all].current, static_cast<std::int64_t>(round_up(bytes, 512)));
  EXPECT_EQ(engine_.deallocate(c, bytes), errc::ok);
  engine_.set_trace_sink(nullptr);
}

TEST_F(EngineTest, ReusesACachedBlockWithoutAskingTheDevice) {
  const device_address a = must_allocate(8 * mib);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
  const device_address b = must_allocate(8 * mib);
  EXPECT_EQ(a, b);
  EXPECT_EQ(device_.counters().reserve, 1u);
}

TEST_F(EngineTest, SplitsTheSmallSegmentAndMergesOnFree) {
  const device_address a = must_allocate(512);
  const device_address b = must_allocate(512);
  EXPECT_EQ(b, a + 512);  // best fit takes the remainder's front
  EXPECT_EQ(engine_.stats().inactive_split[stat_type::all].current, 1);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
  EXPECT_EQ(engine_.deallocate(b), errc::ok);
  const snapshot snap = engine_.take_snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  ASSERT_EQ(snap.segments[0].blocks.size(), 1u);  // merged back into one free block
  EXPECT_EQ(snap.segments[0].blocks[0].bytes, 2 * mib);
  EXPECT_EQ(engine_.stats().inactive_split[stat_type::all].current, 0);
}

TEST_F(EngineTest, NeverReusesABlockAcrossStreams) {
  const device_address a = must_allocate(4 * mib, 1);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
  const device_address b = must_allocate(4 * mib, 2);
  EXPECT_NE(a, b);
  EXPECT_EQ(engine_.stats().segment[stat_type::all].current, 2);
}

TEST_F(EngineTest, ZeroBytesGivesAUniqueMinimumBlock) {
  const device_address a = must_allocate(0);
  const device_address b = must_allocate(0);
  EXPECT_NE(a, b);
  EXPECT_EQ(engine_.stats().allocated_bytes[stat_type::all].current, 1024);
}

TEST_F(EngineTest, EmptyCacheReturnsEveryIdleSegment) {
  const device_address keep = must_allocate(100);
  const device_address drop = must_allocate(30 * mib);
  EXPECT_EQ(engine_.deallocate(drop), errc::ok);
  engine_.empty_cache();
  const device_stats s = engine_.stats();
  EXPECT_EQ(s.reserved_bytes[stat_type::all].current, static_cast<std::int64_t>(2 * mib));
  EXPECT_EQ(s.num_device_free, 1);
  EXPECT_EQ(device_.mapped_bytes(), 2 * mib);
  EXPECT_EQ(engine_.deallocate(keep), errc::ok);
}

TEST_F(EngineTest, OutOfMemoryReleasesTheCacheAndRetriesFirst) {
  const device_address a = must_allocate(200 * mib);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
  // 220 MiB does not fit beside the cached 200 MiB segment on a 256 MiB device: release, retry.
  const device_address b = must_allocate(220 * mib);
  EXPECT_NE(b, 0u);
  const device_stats s = engine_.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.reserved_bytes[stat_type::all].current, static_cast<std::int64_t>(220 * mib));
}

TEST_F(EngineTest, OutOfMemoryReportCarriesTheBooksAndThePhases) {
  engine_.begin_phase("training");
  const device_address a = must_allocate(200 * mib);
  auto r = engine_.allocate(100 * mib, 0);
  ASSERT_FALSE(r.has_value());
  const alloc_error& e = r.error();
  EXPECT_EQ(e.code, errc::out_of_memory);
  EXPECT_EQ(e.report.requested_bytes, 100 * mib);
  EXPECT_EQ(e.report.capacity_bytes, 256 * mib);
  EXPECT_EQ(e.report.allocated_bytes, 200 * mib);
  EXPECT_EQ(e.report.reserved_bytes, 200 * mib);
  EXPECT_EQ(e.report.phase, "training");
  const std::string text = format_oom_report(e.report);
  EXPECT_THAT(text, HasSubstr("Tried to allocate 100.00 MiB"));
  EXPECT_THAT(text, HasSubstr("training"));
  EXPECT_THAT(text, HasSubstr("reserved but unallocated"));
  EXPECT_EQ(engine_.stats().num_ooms, 1);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
}

TEST_F(EngineTest, LimitBytesActsLikeAMemoryFraction) {
  engine_.set_limit_bytes(64 * mib);
  auto r = engine_.allocate(80 * mib, 0);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().report.limit_bytes, 64 * mib);
  EXPECT_EQ(device_.counters().reserve, 0u);  // refused before asking the device
}

TEST_F(EngineTest, DeviceRefusalIsAnOutOfMemoryValueNotACrash) {
  device_.fail_next(model_device_call::reserve, errc::device_refused);
  auto r = engine_.allocate(4 * mib, 0);
  // The first reserve fails; the OOM plan's retry succeeds.
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(engine_.deallocate(r.value()), errc::ok);
}

TEST_F(EngineTest, CrossStreamFreeWaitsForTheOtherStreamsEvents) {
  model_device dev(model_device_config{.capacity_bytes = 256 * mib, .events_complete_immediately = false});
  engine e(dev, policy_, strict_options());
  const device_address a = e.allocate(4 * mib, 1).value();
  EXPECT_EQ(e.record_stream(a, 2), errc::ok);
  EXPECT_EQ(e.deallocate(a), errc::ok);
  device_stats s = e.stats();
  EXPECT_EQ(s.allocated_bytes[stat_type::all].current, 0);
  EXPECT_EQ(s.active_bytes[stat_type::all].current, static_cast<std::int64_t>(4 * mib));  // pending free
  const device_address b = e.allocate(4 * mib, 1).value();
  EXPECT_NE(a, b);  // not reused while stream 2 may still use it
  dev.complete_events(2);
  const device_address c = e.allocate(4 * mib, 1).value();
  EXPECT_EQ(c, a);  // the event completed: the block is back (b still holds the other one)
  EXPECT_EQ(e.stats().active_bytes[stat_type::all].current, static_cast<std::int64_t>(8 * mib));
  EXPECT_EQ(e.deallocate(b), errc::ok);
  EXPECT_EQ(e.deallocate(c), errc::ok);
}

TEST_F(EngineTest, EmptyCacheWaitsForPendingFrees) {
  model_device dev(model_device_config{.capacity_bytes = 256 * mib, .events_complete_immediately = false});
  engine e(dev, policy_, strict_options());
  const device_address a = e.allocate(4 * mib, 1).value();
  EXPECT_EQ(e.record_stream(a, 3), errc::ok);
  EXPECT_EQ(e.deallocate(a), errc::ok);
  e.empty_cache();
  EXPECT_EQ(e.stats().reserved_bytes[stat_type::all].current, 0);
  EXPECT_EQ(e.stats().num_sync_all_streams, 1);
  EXPECT_EQ(dev.mapped_bytes(), 0u);
}

TEST_F(EngineTest, HeldDeviceCallsFreeNothingAndWaitOnNoEvent) {
  // A CUDA graph capture is under way: empty_cache, out-of-memory releases and event polling wait.
  model_device dev(model_device_config{.capacity_bytes = 256 * mib, .events_complete_immediately = false});
  engine e(dev, policy_, strict_options());
  const device_address a = e.allocate(4 * mib, 1).value();
  EXPECT_EQ(e.record_stream(a, 3), errc::ok);
  const device_address cached = e.allocate(200 * mib, 2).value();  // another stream: never reused for stream 1
  EXPECT_EQ(e.deallocate(cached), errc::ok);
  e.hold_device_calls(true);
  EXPECT_EQ(e.deallocate(a), errc::ok);
  e.empty_cache();
  EXPECT_EQ(e.stats().num_sync_all_streams, 0);
  EXPECT_EQ(e.stats().num_device_free, 0);
  EXPECT_EQ(dev.mapped_bytes(), 204 * mib);
  dev.complete_events(3);
  const device_address b = e.allocate(4 * mib, 1).value();
  EXPECT_NE(a, b);  // the completed event was not polled while held
  EXPECT_FALSE(e.allocate(220 * mib, 1).has_value());  // no release of the cached 200 MiB to retry
  e.hold_device_calls(false);
  const device_address c = e.allocate(220 * mib, 1).value();  // released, retried
  EXPECT_NE(c, 0u);
  EXPECT_EQ(e.stats().num_device_free, 2);  // the cached 200 MiB, and a's segment (its event is done)
  EXPECT_EQ(e.deallocate(b), errc::ok);
  EXPECT_EQ(e.deallocate(c), errc::ok);
}

TEST_F(EngineTest, PhasesKeepTheirOwnPeaksAndFragmentation) {
  engine_.begin_phase("generation");
  std::vector<device_address> kv;
  for (int i = 0; i < 8; ++i) kv.push_back(must_allocate(4 * mib));       // 8 segments of 4 MiB
  for (int i = 0; i < 8; i += 2) EXPECT_EQ(engine_.deallocate(kv[i]), errc::ok);  // 4 holes of 4 MiB
  const device_address logits = must_allocate(8 * mib);                   // fits no hole: grows
  for (int i = 1; i < 8; i += 2) EXPECT_EQ(engine_.deallocate(kv[i]), errc::ok);
  EXPECT_EQ(engine_.deallocate(logits), errc::ok);
  engine_.end_phase();
  engine_.begin_phase("training");
  const device_address act = must_allocate(40 * mib);
  EXPECT_EQ(engine_.current_phase(), "training");
  engine_.end_phase();
  EXPECT_EQ(engine_.current_phase(), "unphased");

  const std::vector<phase_stats> phases = engine_.phases();
  const auto find = [&](std::string_view name) {
    return *std::find_if(phases.begin(), phases.end(), [&](auto& p) { return p.name == name; });
  };
  const phase_stats gen = find("generation");
  const phase_stats train = find("training");
  EXPECT_EQ(gen.intervals, 1);
  EXPECT_EQ(gen.peak_allocated_bytes, static_cast<std::int64_t>(32 * mib));
  EXPECT_EQ(gen.peak_reserved_bytes, static_cast<std::int64_t>(40 * mib));
  EXPECT_DOUBLE_EQ(gen.fragmentation(), 0.2);
  EXPECT_EQ(gen.reserved_unallocated_at_peak_bytes, static_cast<std::int64_t>(16 * mib));
  EXPECT_EQ(gen.num_allocs, 9);
  EXPECT_EQ(gen.num_frees, 9);
  EXPECT_EQ(gen.num_device_alloc, 9);
  // Training inherits generation's 40 MiB cache: its reserved peak counts it.
  EXPECT_EQ(train.peak_allocated_bytes, static_cast<std::int64_t>(40 * mib));
  EXPECT_EQ(train.peak_reserved_bytes, static_cast<std::int64_t>(80 * mib));
  EXPECT_EQ(train.reserved_unallocated_at_peak_bytes, static_cast<std::int64_t>(40 * mib));
  EXPECT_EQ(train.largest_free_block_at_peak_bytes, static_cast<std::int64_t>(8 * mib));
  EXPECT_DOUBLE_EQ(train.fragmentation(), 0.5);
  EXPECT_EQ(engine_.deallocate(act), errc::ok);
}

TEST_F(EngineTest, SetPhaseReplacesWithoutNesting) {
  engine_.set_phase("generation");
  engine_.set_phase("training");
  EXPECT_EQ(engine_.current_phase(), "training");
  engine_.end_phase();  // nothing below: stays
  EXPECT_EQ(engine_.current_phase(), "training");
}

TEST_F(EngineTest, ResetPeakStatsBringsPeaksToCurrent) {
  const device_address a = must_allocate(10 * mib);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
  engine_.reset_peak_stats();
  EXPECT_EQ(engine_.stats().allocated_bytes[stat_type::all].peak, 0);
  EXPECT_EQ(engine_.stats().reserved_bytes[stat_type::all].peak, static_cast<std::int64_t>(10 * mib));
  engine_.reset_accumulated_stats();
  EXPECT_EQ(engine_.stats().allocated_bytes[stat_type::all].allocated, 0);
  EXPECT_EQ(engine_.stats().num_device_alloc, 0);
}

TEST_F(EngineTest, MemoryStatsKeysMatchTorch) {
  const auto keys = to_memory_stats(engine_.stats());
  const auto has = [&](std::string_view k) {
    return std::any_of(keys.begin(), keys.end(), [&](auto& kv) { return kv.first == k; });
  };
  for (const char* k : {"allocated_bytes.all.current", "reserved_bytes.large_pool.peak", "active_bytes.small_pool.freed",
                        "requested_bytes.all.allocated", "inactive_split_bytes.all.current", "segment.all.current",
                        "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free", "num_sync_all_streams"}) {
    EXPECT_TRUE(has(k)) << k;
  }
}

TEST_F(EngineTest, TraceSinkSeesEveryStep) {
  recording_sink sink;
  engine_.set_trace_sink(&sink);
  engine_.begin_phase("generation");
  const device_address a = must_allocate(100);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
  engine_.empty_cache();
  engine_.set_trace_sink(nullptr);
  EXPECT_EQ(sink.count(trace_op::phase_begin), 1u);
  EXPECT_EQ(sink.count(trace_op::segment_alloc), 1u);
  EXPECT_EQ(sink.count(trace_op::alloc), 1u);
  EXPECT_EQ(sink.count(trace_op::free_requested), 1u);
  EXPECT_EQ(sink.count(trace_op::free_completed), 1u);
  EXPECT_EQ(sink.count(trace_op::empty_cache), 1u);
  EXPECT_EQ(sink.count(trace_op::segment_free), 1u);
  EXPECT_THAT(sink.names, ::testing::Contains("generation"));
}

// --- misuse ------------------------------------------------------------------------------------

class EngineMisuseTest : public EngineTest {
 protected:
  engine lenient_{device_, policy_, engine_options{.strict = false, .check_invariants = true}};
};

TEST_F(EngineMisuseTest, UnknownPointerIsReportedAndCounted) {
  EXPECT_EQ(lenient_.deallocate(0x1234), errc::unknown_pointer);
  EXPECT_EQ(lenient_.stats().num_misuse, 1);
  EXPECT_THAT(lenient_.last_misuse().message, HasSubstr("0x1234"));
}

TEST_F(EngineMisuseTest, DoubleFreeIsReportedAndTheBooksStayExact) {
  const device_address a = lenient_.allocate(1000, 0).value();
  const device_address b = lenient_.allocate(1000, 0).value();
  EXPECT_EQ(lenient_.deallocate(a), errc::ok);
  EXPECT_EQ(lenient_.deallocate(a), errc::double_free);
  EXPECT_THAT(lenient_.last_misuse().message, HasSubstr("already freed"));
  EXPECT_EQ(lenient_.stats().allocated_bytes[stat_type::all].current, 1024);  // b only
  EXPECT_TRUE(lenient_.check_invariants().empty());
  EXPECT_EQ(lenient_.deallocate(b), errc::ok);
}

TEST_F(EngineMisuseTest, InteriorPointerAndSizeMismatchAreNamed) {
  const device_address a = lenient_.allocate(4096, 0).value();
  EXPECT_EQ(lenient_.deallocate(a + 16), errc::interior_pointer);
  EXPECT_THAT(lenient_.last_misuse().message, HasSubstr("16 bytes into"));
  EXPECT_EQ(lenient_.deallocate(a, 100), errc::size_mismatch);  // reported, and the block is freed
  EXPECT_EQ(lenient_.last_misuse().expected_bytes, 4096u);
  EXPECT_EQ(lenient_.stats().allocated_bytes[stat_type::all].current, 0);
  EXPECT_EQ(lenient_.stats().num_misuse, 2);
}

TEST_F(EngineMisuseTest, RecordStreamOnAnUnknownPointerIsMisuse) {
  EXPECT_EQ(lenient_.record_stream(0xdead000, 1), errc::unknown_pointer);
}

using EngineDeathTest = EngineTest;

TEST_F(EngineDeathTest, StrictModeAbortsWithTheEvidence) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const device_address a = must_allocate(1000);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
  EXPECT_DEATH((void)engine_.deallocate(a), "double free.*already freed");
  EXPECT_DEATH((void)engine_.deallocate(0x42), "unknown pointer.*0x42");
}

// --- expandable pools and page release on a virtual-memory device --------------------------------

class EngineVmmTest : public ::testing::Test {
 protected:
  model_device device_{model_device_config{.capacity_bytes = 256 * mib, .virtual_memory = true}};
  basic_policy policy_{basic_policy_options{.expandable_large = true}};
  engine engine_{device_, policy_, strict_options()};
};

TEST_F(EngineVmmTest, ExpandablePoolMapsOnlyThePagesItNeeds) {
  const device_address a = engine_.allocate(3 * mib, 0).value();
  const device_address b = engine_.allocate(3 * mib, 0).value();
  EXPECT_EQ(b, a + 3 * mib);  // contiguous in one reservation
  const device_stats s = engine_.stats();
  EXPECT_EQ(s.reserved_bytes[stat_type::all].current, static_cast<std::int64_t>(6 * mib));
  EXPECT_EQ(device_.mapped_bytes(), 6 * mib);
  EXPECT_EQ(s.num_device_alloc, 1);  // one reservation
  EXPECT_EQ(s.num_device_map, 2);
  EXPECT_EQ(engine_.deallocate(a), errc::ok);
  EXPECT_EQ(engine_.deallocate(b), errc::ok);
  engine_.empty_cache();
  EXPECT_EQ(engine_.stats().reserved_bytes[stat_type::all].current, 0);
  EXPECT_EQ(device_.mapped_bytes(), 0u);
}

TEST_F(EngineVmmTest, PageReleaseReturnsHolesBetweenLiveBlocks) {
  const device_address a = engine_.allocate(2 * mib, 0).value();
  const device_address hole = engine_.allocate(10 * mib, 0).value();
  const device_address c = engine_.allocate(2 * mib, 0).value();
  EXPECT_EQ(engine_.deallocate(hole), errc::ok);
  release_step pages;
  pages.what = release_what::free_pages;
  EXPECT_EQ(engine_.release({pages}), 10 * mib);
  EXPECT_EQ(device_.mapped_bytes(), 4 * mib);
  // The hole is mapped again, in place, when a request needs it.
  const device_address again = engine_.allocate(10 * mib, 0).value();
  EXPECT_EQ(again, hole);
  EXPECT_EQ(device_.mapped_bytes(), 14 * mib);
  for (device_address p : {a, again, c}) EXPECT_EQ(engine_.deallocate(p), errc::ok);
}

// A host that adds the engine's reserved bytes to another allocator's (the c10 bridge's peak of
// reserved) follows them from the events alone: each segment event carries the level after it,
// also where a segment whose pages were unmapped earlier is released (its segment_free names the
// whole segment, more than it gives back).
TEST(EngineEventsTest, EverySegmentEventCarriesTheReservedBytesAfterIt) {
  model_device device(model_device_config{.capacity_bytes = 256 * mib, .virtual_memory = true});
  basic_policy policy(basic_policy_options{.large_round_bytes = 16 * mib});  // whole segments, pages unmappable
  engine e(device, policy, strict_options());
  recording_sink sink;
  e.set_trace_sink(&sink);
  const auto reserved = [&] { return static_cast<std::size_t>(e.stats().reserved_bytes[stat_type::all].current); };
  const auto last_segment_event = [&]() -> const trace_record& {
    const auto it = std::find_if(sink.records.rbegin(), sink.records.rend(), [](const trace_record& r) {
      return r.op == trace_op::segment_alloc || r.op == trace_op::segment_map || r.op == trace_op::segment_unmap ||
             r.op == trace_op::segment_free;
    });
    EXPECT_NE(it, sink.records.rend());
    return *it;
  };

  const device_address a = e.allocate(4 * mib, 0).value();  // [a 4][free 12] in one 16 MiB segment
  const device_address b = e.allocate(4 * mib, 0).value();  // [a 4][b 4][free 8]
  EXPECT_EQ(last_segment_event().op, trace_op::segment_alloc);
  EXPECT_EQ(last_segment_event().reserved_bytes, 16 * mib);
  EXPECT_EQ(sink.records.back().reserved_bytes, reserved());  // block events carry it too
  EXPECT_EQ(e.deallocate(a), errc::ok);
  release_step pages;
  pages.what = release_what::free_pages;
  EXPECT_EQ(e.release({pages}), 12 * mib);  // the 4 MiB hole and the 8 MiB tail
  EXPECT_EQ(last_segment_event().op, trace_op::segment_unmap);
  EXPECT_EQ(last_segment_event().reserved_bytes, 4 * mib);
  EXPECT_EQ(reserved(), 4 * mib);
  EXPECT_EQ(e.deallocate(b), errc::ok);
  e.empty_cache();
  const trace_record& freed = last_segment_event();
  EXPECT_EQ(freed.op, trace_op::segment_free);
  EXPECT_EQ(freed.block_bytes, 16 * mib);  // the segment's size, as PyTorch's trace names it...
  EXPECT_EQ(freed.reserved_bytes, 0u);     // ...while only the 4 MiB still mapped went back
  EXPECT_EQ(reserved(), 0u);
  e.set_trace_sink(nullptr);
}

TEST(EngineExpandableFallback, AnExpandablePoolOnAWholeSegmentDeviceUsesSegments) {
  model_device device(model_device_config{.capacity_bytes = 64 * mib});
  basic_policy policy(basic_policy_options{.expandable_large = true});
  engine e(device, policy, strict_options());
  const device_address a = e.allocate(3 * mib, 0).value();
  EXPECT_EQ(e.stats().reserved_bytes[stat_type::all].current, static_cast<std::int64_t>(4 * mib));
  EXPECT_EQ(e.deallocate(a), errc::ok);
}

}  // namespace
}  // namespace phasealloc
