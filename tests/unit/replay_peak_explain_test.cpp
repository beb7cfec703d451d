// replay --explain-peak (tools/replay peak_explain.hpp): the mapped bytes at a peak that are not
// allocated, by kind. A layout built by hand checks the page walk; the actor of tests/data/colocate
// (2 GiB of weights, 6 GiB of activations in `train`) checks the moments a replay finds.
#include <filesystem>

#include <gtest/gtest.h>

#include "phasealloc/replay/peak_explain.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

constexpr std::size_t page = 2 * mib;

snapshot_block blk(device_address addr, std::size_t bytes, block_state state) {
  return snapshot_block{addr, bytes, state == block_state::allocated ? bytes : 0, state};
}

TEST(PeakExplain, SortsFreeBytesIntoLivePagesHolesAndEdges) {
  // One reservation of 16 pages at 0x10000000 (p = page):
  //   [0, 1.5p) allocated, [1.5p, 5p) free, [5p, 6p) allocated, [6p, 8p) free, [8p, 12p) unmapped,
  //   [12p, 13p) allocated, [13p, 16p) free (mapped).
  const device_address base = 0x10000000;
  snapshot_segment s;
  s.addr = base;
  s.bytes = 16 * page;
  s.pool = "large";
  s.blocks = {blk(base, 3 * page / 2, block_state::allocated), blk(base + 3 * page / 2, 7 * page / 2, block_state::free),
              blk(base + 5 * page, page, block_state::allocated), blk(base + 6 * page, 2 * page, block_state::free),
              blk(base + 8 * page, 4 * page, block_state::unmapped), blk(base + 12 * page, page, block_state::allocated),
              blk(base + 13 * page, 3 * page, block_state::free)};
  s.mapped_bytes = 12 * page;
  s.allocated_bytes = s.active_bytes = 7 * page / 2;
  snapshot layout;
  layout.segments.push_back(s);
  const std::vector<pool_peak_part> parts = explain_layout(layout, page);
  ASSERT_EQ(parts.size(), 1u);
  const pool_peak_part& p = parts[0];
  EXPECT_EQ(p.pool, "large");
  EXPECT_EQ(p.mapped_bytes, 12 * page);
  EXPECT_EQ(p.allocated_bytes, 7 * page / 2);
  EXPECT_EQ(p.free_bytes(), 17 * page / 2);
  // Page 1 holds half a page of the first block: its other half is free in a live page.
  EXPECT_EQ(p.live_page_free_bytes, page / 2);
  EXPECT_EQ(p.live_pages, 1u);
  EXPECT_EQ(p.live_pages_one_block, 1u);
  // Pages 2-4 lie between live pages 1 and 5: one hole of three pages.
  EXPECT_EQ(p.holes, 1u);
  EXPECT_EQ(p.hole_bytes, 3 * page);
  EXPECT_EQ(p.largest_hole_bytes, 3 * page);
  EXPECT_EQ(p.small_hole_bytes, 3 * page);
  // Pages 6-7 end at unmapped space, 13-15 at the reservation's end: two edges.
  EXPECT_EQ(p.edges, 2u);
  EXPECT_EQ(p.edge_bytes, 5 * page);
  EXPECT_EQ(p.live_page_free_bytes + p.hole_bytes + p.edge_bytes, p.free_bytes());
}

trace actor() {
  const std::filesystem::path path = std::filesystem::path(PHASEALLOC_SOURCE_DIR) / "tests/data/colocate/actor.txt";
  return testing::load_text_trace(path);
}

TEST(PeakExplain, FindsThePeaksOfAReplay) {
  // pytorch: the activations' 6 GiB segment is the peak (event 3, in train) and stays cached: at
  // the second train's allocation (event 8) reserved and allocated are both 8 GiB again.
  auto e = explain_peak(actor(), "pytorch");
  ASSERT_TRUE(e.has_value()) << e.error();
  EXPECT_EQ(e.value().peak_reserved_bytes, 8 * gib);
  EXPECT_EQ(e.value().peak_allocated_bytes, 8 * gib);
  EXPECT_EQ(e.value().at_peak_reserved.event, 3u);
  EXPECT_EQ(e.value().at_peak_reserved.phase, "train");
  EXPECT_EQ(e.value().at_peak_reserved.reserved_bytes, 8 * gib);
  EXPECT_EQ(e.value().at_peak_reserved.allocated_bytes, 8 * gib);
  // phasealloc:release:all returns the 6 GiB at train -> sync: after event 3 everything is allocated.
  auto all = explain_peak(actor(), "phasealloc:release:all,release_threshold:0");
  ASSERT_TRUE(all.has_value()) << all.error();
  EXPECT_EQ(all.value().at_peak_allocated.reserved_bytes, 8 * gib);
  EXPECT_EQ(all.value().at_peak_allocated.allocated_bytes, 8 * gib);
  EXPECT_EQ(all.value().page_bytes, 2 * mib);
  const std::string text = render_peak_explanation(all.value());
  EXPECT_NE(text.find("at the peak reserved (after event 3, phase train)"), std::string::npos) << text;
  EXPECT_FALSE(explain_peak(actor(), "nonsense").has_value());
}

}  // namespace
}  // namespace phasealloc
