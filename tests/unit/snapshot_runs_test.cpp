// mapped_runs (phasealloc/snapshot.hpp): the segment list both PyTorch snapshot writers report.
#include <gtest/gtest.h>

#include "phasealloc/snapshot.hpp"

namespace phasealloc {
namespace {

snapshot_block blk(device_address addr, std::size_t bytes, block_state state, std::size_t requested = 0) {
  return {addr, bytes, requested, state};
}

TEST(SnapshotRunsTest, AnUnmappedBlockSplitsASegmentIntoRuns) {
  snapshot snap;
  snapshot_segment seg;
  seg.addr = 0x1000;
  seg.blocks = {blk(0x1000, 0x100, block_state::allocated, 0x80), blk(0x1100, 0x100, block_state::free),
                blk(0x1200, 0x200, block_state::unmapped), blk(0x1400, 0x100, block_state::pending_free, 0x40),
                blk(0x1500, 0x300, block_state::unmapped)};
  snap.segments.push_back(seg);
  snapshot_segment whole;
  whole.addr = 0x9000;
  whole.blocks = {blk(0x9000, 0x400, block_state::free)};
  snap.segments.push_back(whole);

  const std::vector<snapshot_run> runs = mapped_runs(snap);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].segment, &snap.segments[0]);
  ASSERT_EQ(runs[0].blocks.size(), 2u);
  EXPECT_EQ(runs[0].blocks.front().addr, 0x1000u);
  EXPECT_EQ(runs[0].total_bytes, 0x200u);
  EXPECT_EQ(runs[0].allocated_bytes, 0x100u);
  EXPECT_EQ(runs[0].active_bytes, 0x100u);
  EXPECT_EQ(runs[0].requested_bytes, 0x80u);
  ASSERT_EQ(runs[1].blocks.size(), 1u);
  EXPECT_EQ(runs[1].blocks.front().addr, 0x1400u);
  EXPECT_EQ(runs[1].allocated_bytes, 0u);  // pending free: active, not allocated
  EXPECT_EQ(runs[1].active_bytes, 0x100u);
  EXPECT_EQ(runs[1].requested_bytes, 0x40u);
  EXPECT_EQ(runs[2].segment, &snap.segments[1]);
  EXPECT_EQ(runs[2].total_bytes, 0x400u);
  EXPECT_EQ(runs[2].active_bytes, 0u);
}

TEST(SnapshotRunsTest, BlockStatesTakePyTorchsNames) {
  EXPECT_EQ(torch_block_state(block_state::allocated), "active_allocated");
  EXPECT_EQ(torch_block_state(block_state::pending_free), "active_pending_free");
  EXPECT_EQ(torch_block_state(block_state::free), "inactive");
}

}  // namespace
}  // namespace phasealloc
