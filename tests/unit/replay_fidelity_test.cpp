// Fidelity of the `pytorch` policy: replaying a real snapshot recorded from an empty PyTorch
// allocator must make the same device allocations, in the same order and sizes, and reach the same
// peak reserved as PyTorch did. Plus replays of the mid-run snapshots and the CLI's JSON contract.
#include <filesystem>

#include <gtest/gtest.h>

#include "phasealloc/import/snapshot_importer.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_summary.hpp"

namespace phasealloc {
namespace {

std::filesystem::path snapshot_path(const char* name) {
  return std::filesystem::path(PHASEALLOC_SHARED_TRACES_DIR) / name;
}

trace load(const char* name) {
  auto t = import_snapshot_file(snapshot_path(name));
  EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().message());
  return t.has_value() ? std::move(t).value() : trace{};
}

TEST(ReplayFidelityTest, PytorchPolicyReproducesTheRecordedSegmentAllocations) {
  const trace t = load("cs336_mem_snapshot.pickle");
  std::vector<std::size_t> recorded;
  for (const trace_event& e : t.events) {
    if (e.op == trace_event_op::segment_alloc) recorded.push_back(e.bytes);
  }
  ASSERT_EQ(recorded.size(), 9u);

  replay_options options;
  options.record_segments = true;
  options.check_invariants = true;
  auto r = replay(t, "pytorch", options);
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r.value().segment_alloc_bytes, recorded);  // count, order and sizes
  EXPECT_EQ(r.value().peak_reserved_bytes, summarize(t).peak_reserved_bytes);
  EXPECT_EQ(r.value().peak_reserved_bytes, 3'781'165'056u);
  EXPECT_EQ(r.value().device_frees, 0);
  EXPECT_EQ(r.value().ooms, 0);
}

TEST(ReplayFidelityTest, MidRunSnapshotsReplayWithinTheirRecordedFootprint) {
  for (const char* name : {"cs336_memory_forward_bf16_128.pickle", "cs336_memory_forward_fp32_128.pickle"}) {
    const trace t = load(name);
    const trace_summary s = summarize(t);
    for (const char* spec : {"pytorch", "pytorch:expandable_segments:True", "phasealloc"}) {
      replay_options options;
      options.check_invariants = true;
      auto r = replay(t, spec, options);
      ASSERT_TRUE(r.has_value()) << r.error();
      EXPECT_EQ(r.value().ooms, 0) << name << " " << spec;
      EXPECT_GE(r.value().peak_reserved_bytes, s.peak_live_bytes) << name << " " << spec;  // the floor
      // PyTorch's own allocator held this much for the same live set (seeded segments).
      EXPECT_LE(r.value().peak_reserved_bytes, s.peak_reserved_bytes + 64 * mib) << name << " " << spec;
    }
  }
}

TEST(ReplayFidelityTest, PhaseallocNeverReservesMoreThanPytorchOnTheRealSnapshots) {
  for (const char* name : {"cs336_mem_snapshot.pickle", "cs336_memory_forward_bf16_128.pickle",
                           "cs336_memory_forward_fp32_128.pickle"}) {
    const trace t = load(name);
    auto native = replay(t, "pytorch");
    auto ours = replay(t, "phasealloc");
    ASSERT_TRUE(native.has_value() && ours.has_value());
    EXPECT_LE(ours.value().peak_reserved_bytes, native.value().peak_reserved_bytes) << name;
  }
}

}  // namespace
}  // namespace phasealloc
