// Recorded offload and restore calls (trace version 3): what the recorder writes, both codecs and
// the validator read, and the replay makes the same calls, so a phase's peak shows what left.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/basic_policy.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_binary.hpp"
#include "phasealloc/trace/trace_recorder.hpp"
#include "phasealloc/trace/trace_text.hpp"
#include "phasealloc/trace/trace_validate.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;

/// Training holds two 8 MiB blocks; generation offloads both (one call) and uses 16 MiB of its own;
/// the optimizer phase restores them.
trace recorded_job() {
  model_device dev{model_device_config{
      .capacity_bytes = 1 * gib, .granularity_bytes = 2 * mib, .virtual_memory = true, .host_backing = true}};
  basic_policy pol;
  engine eng{dev, pol};
  trace_recorder recorder;
  eng.set_trace_sink(&recorder);
  eng.set_phase("training");
  const device_address a = eng.allocate(8 * mib, 0).value();
  const device_address b = eng.allocate(8 * mib, 0).value();
  eng.set_phase("generation");
  EXPECT_TRUE(eng.offload(std::vector<device_address>{a, b}).has_value());
  eng.deallocate(eng.allocate(16 * mib, 0).value());
  eng.empty_cache();
  eng.set_phase("optimizer");
  EXPECT_TRUE(eng.restore(std::vector<device_address>{a}).has_value());
  eng.deallocate(a);
  eng.deallocate(b);
  eng.set_trace_sink(nullptr);
  return recorder.take();
}

std::vector<trace_event> events_of(const trace& t, trace_event_op op) {
  std::vector<trace_event> out;
  std::copy_if(t.events.begin(), t.events.end(), std::back_inserter(out), [&](const auto& e) { return e.op == op; });
  return out;
}

std::int64_t phase_peak(const replay_result& r, const std::string& name) {
  for (const phase_stats& p : r.phases) {
    if (p.name == name) return p.peak_reserved_bytes;
  }
  ADD_FAILURE() << "no phase " << name;
  return -1;
}

replay_options small_gpu() {
  replay_options o;
  o.capacity_bytes = 1 * gib;
  return o;
}

TEST(ReplayOffloadTest, TheRecorderWritesOneEventPerNamedBlockWithTheCallsOrdinal) {
  const trace t = recorded_job();
  EXPECT_EQ(t.version, trace_format_version_offload);
  const auto offloads = events_of(t, trace_event_op::offload);
  const auto restores = events_of(t, trace_event_op::restore);
  ASSERT_EQ(offloads.size(), 2u);
  EXPECT_EQ(offloads[0].bytes, offloads[1].bytes);  // one call
  EXPECT_NE(offloads[0].alloc_id, offloads[1].alloc_id);
  ASSERT_EQ(restores.size(), 1u);  // one block names the range it restores
  EXPECT_NE(restores[0].bytes, offloads[0].bytes);
  EXPECT_TRUE(validate(t).has_value());
}

TEST(ReplayOffloadTest, BothCodecsKeepTheEvents) {
  const trace t = recorded_job();
  auto binary = decode_trace(encode_trace(t), "recorded");
  ASSERT_TRUE(binary.has_value()) << binary.error().message();
  EXPECT_EQ(binary.value().events, t.events);
  EXPECT_EQ(binary.value().version, trace_format_version_offload);
  auto text = parse_trace_text(format_trace_text(t), "recorded");
  ASSERT_TRUE(text.has_value()) << text.error().message();
  EXPECT_EQ(text.value().events, t.events);
}

TEST(ReplayOffloadTest, PyTorchsAllocatorMakesNoneOfTheCallsAndTheReplaySaysWhy) {
  auto r = replay(recorded_job(), "pytorch", small_gpu());
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r.value().offloaded_bytes, 0u);
  EXPECT_EQ(r.value().offload_failures, 3);  // the offload (a run per segment), and the restore
  EXPECT_THAT(r.value().first_offload_failure, HasSubstr("PyTorch's allocator has no same-address offload"));
  auto expandable = replay(recorded_job(), "pytorch:expandable_segments:True", small_gpu());  // no offload either
  ASSERT_TRUE(expandable.has_value()) << expandable.error();
  EXPECT_EQ(expandable.value().offloaded_bytes, 0u);
  EXPECT_EQ(expandable.value().offload_failures, 3);
}

TEST(ReplayOffloadTest, TheValidatorNamesAnOffloadOfAnAllocationThatIsNotLive) {
  trace t = recorded_job();
  for (trace_event& e : t.events) {
    if (e.op == trace_event_op::offload) e.alloc_id = 999;
  }
  auto v = validate(t);
  ASSERT_FALSE(v.has_value());
  EXPECT_THAT(v.error().message(), HasSubstr("999"));
  trace old = recorded_job();
  old.version = trace_format_version_layout;
  auto w = validate(old);
  ASSERT_FALSE(w.has_value());
  EXPECT_THAT(w.error().message(), HasSubstr("needs trace version 3"));
}

TEST(ReplayOffloadTest, TheReplayMakesTheRecordedCallsAndThePhasePeakShowsWhatLeft) {
  const trace t = recorded_job();
  trace without = t;
  std::erase_if(without.events, [](const trace_event& e) {
    return e.op == trace_event_op::offload || e.op == trace_event_op::restore;
  });
  without.version = trace_format_version_plain;
  auto with_offload = replay(t, "phasealloc", small_gpu());
  auto plain = replay(without, "phasealloc", small_gpu());
  ASSERT_TRUE(with_offload.has_value()) << with_offload.error();
  ASSERT_TRUE(plain.has_value()) << plain.error();
  EXPECT_EQ(with_offload.value().offloaded_bytes, 16 * mib);
  EXPECT_EQ(with_offload.value().restored_bytes, 8 * mib);  // a alone (b, in its own segment, was freed away)
  EXPECT_EQ(with_offload.value().offload_failures, 0);
  EXPECT_EQ(plain.value().offloaded_bytes, 0u);
  // Generation's own memory, beside the trainer's 16 MiB unless they left.
  EXPECT_EQ(phase_peak(plain.value(), "generation") - phase_peak(with_offload.value(), "generation"),
            static_cast<std::int64_t>(16 * mib));
}

replay_result replayed(const trace& t, offload_replay mode, std::size_t capacity_bytes) {
  replay_options o = small_gpu();
  o.capacity_bytes = capacity_bytes;
  o.offload = mode;
  o.check_invariants = true;
  auto r = replay(t, "phasealloc", o);
  EXPECT_TRUE(r.has_value()) << r.error();
  return r.has_value() ? std::move(r).value() : replay_result{};
}

std::int64_t phase_ooms(const replay_result& r, const std::string& name) {
  for (const phase_stats& p : r.phases) {
    if (p.name == name) return p.num_ooms;
  }
  return -1;
}

TEST(ReplayOffloadTest, NoneIgnoresTheRecordedCalls) {
  const replay_result none = replayed(recorded_job(), offload_replay::none, 1 * gib);
  EXPECT_EQ(none.offload_mode, offload_replay::none);
  EXPECT_EQ(none.offloaded_bytes, 0u);
  EXPECT_EQ(none.restored_bytes, 0u);
  EXPECT_EQ(none.offload_failures, 0);
  EXPECT_EQ(phase_peak(none, "generation") - phase_peak(replayed(recorded_job(), offload_replay::recorded, 1 * gib),
                                                        "generation"),
            static_cast<std::int64_t>(16 * mib));
}

// offload:pressure: with memory to spare nothing moves; where an allocation would run out, the held
// calls leave first and it fits, and the restore brings back only what left.
TEST(ReplayOffloadTest, PressureMovesNothingWithMemoryToSpare) {
  const replay_result pressure = replayed(recorded_job(), offload_replay::pressure, 1 * gib);
  EXPECT_EQ(pressure.offload_mode, offload_replay::pressure);
  EXPECT_EQ(pressure.offloaded_bytes, 0u);
  EXPECT_EQ(pressure.restored_bytes, 0u);
  EXPECT_EQ(pressure.pressure_calls, 0);
  EXPECT_EQ(pressure.pressure_relieved, 0);
  EXPECT_EQ(phase_peak(pressure, "generation"),
            phase_peak(replayed(recorded_job(), offload_replay::none, 1 * gib), "generation"));
}

TEST(ReplayOffloadTest, PressureOffloadsWhereAnAllocationWouldRunOutAndTheJobFits) {
  const std::size_t gpu = 24 * mib;  // the trainer's 16 MiB and generation's 16 MiB do not fit together
  const replay_result none = replayed(recorded_job(), offload_replay::none, gpu);
  EXPECT_GT(none.ooms, 0);
  EXPECT_GT(phase_ooms(none, "generation"), 0);
  const replay_result pressure = replayed(recorded_job(), offload_replay::pressure, gpu);
  EXPECT_EQ(pressure.ooms, 0);
  EXPECT_EQ(phase_ooms(pressure, "generation"), 0);  // the try the handler answered is no out-of-memory
  EXPECT_EQ(pressure.pressure_relieved, 1);
  EXPECT_GE(pressure.pressure_calls, 1);
  EXPECT_GT(pressure.offloaded_bytes, 0u);
  EXPECT_LE(pressure.offloaded_bytes, 16 * mib);
  EXPECT_EQ(pressure.offload_failures, 0);
  EXPECT_LE(phase_peak(pressure, "generation"), static_cast<std::int64_t>(gpu));
  // The restore brings back a's pages only if a had left (a free block's pages never come back).
  EXPECT_LE(pressure.restored_bytes, 8 * mib);
}

}  // namespace
}  // namespace phasealloc
