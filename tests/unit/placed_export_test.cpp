// phasealloc export --policy SPEC (tools/export): the pickle holds what the replay placed. Checked
// on the written bytes, read back with the pickle reader, as memory_viz reads them: every block
// lies inside a segment of the same device, the segments add up to the replay's reserved bytes at
// the end, and the device trace is well-formed (every alloc inside mapped memory, frees pair with
// allocs, segment events add up to the replay's peak and final reserved bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "phasealloc/export/placed_replay.hpp"
#include "phasealloc/export/torch_trace_recorder.hpp"
#include "phasealloc/import/pickle_reader.hpp"
#include "phasealloc/export/placed_snapshot_exporter.hpp"
#include "phasealloc/import/snapshot_importer.hpp"
#include "phasealloc/trace/trace_file.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

using testing::make_event;

trace bundled_trace() {
  const auto path = std::filesystem::path(PHASEALLOC_SOURCE_DIR) / "tools" / "data" / "ppo-125m.patrace";
  auto t = load_trace(path);
  EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().message());
  return t ? std::move(t).value() : trace{};
}

/// Mapped address ranges, start -> end, merged.
class range_set {
 public:
  void add(std::uint64_t lo, std::uint64_t hi) {
    auto it = ranges_.upper_bound(lo);
    if (it != ranges_.begin() && std::prev(it)->second >= lo) it = std::prev(it);
    while (it != ranges_.end() && it->first <= hi) {
      lo = std::min(lo, it->first);
      hi = std::max(hi, it->second);
      it = ranges_.erase(it);
    }
    ranges_.emplace(lo, hi);
  }
  bool covers(std::uint64_t lo, std::uint64_t hi) const {
    auto it = ranges_.upper_bound(lo);
    if (it == ranges_.begin()) return false;
    --it;
    return it->first <= lo && hi <= it->second;
  }
  void remove(std::uint64_t lo, std::uint64_t hi) {
    auto it = ranges_.upper_bound(lo);
    if (it != ranges_.begin()) it = std::prev(it);
    while (it != ranges_.end() && it->first < hi) {
      const auto [start, stop] = *it;
      if (stop <= lo) {
        ++it;
        continue;
      }
      it = ranges_.erase(it);
      if (start < lo) ranges_.emplace(start, lo);
      if (stop > hi) ranges_.emplace(hi, stop);
    }
  }

 private:
  std::map<std::uint64_t, std::uint64_t> ranges_;
};

struct checked {
  std::size_t segment_bytes = 0;     ///< Sum of the segments' total_size.
  std::size_t viz_allocated = 0;     ///< memory_viz's total_allocated: requested bytes of active_allocated blocks.
  std::size_t peak_reserved = 0;     ///< From the segment entries.
  std::size_t final_reserved = 0;    ///< From the segment entries.
  std::size_t ooms = 0;
};

/// Reads the pickle as memory_viz does and checks every property; returns the totals.
checked check_pickle(const std::string& bytes, std::size_t capacity) {
  checked out;
  auto doc = read_pickle(bytes, "export");
  EXPECT_TRUE(doc.has_value()) << (doc ? "" : doc.error().message());
  if (!doc) return out;
  const pickle_ref root = doc.value().root();
  const pickle_ref segments = root.get("segments");
  const pickle_ref traces = root.get("device_traces");
  EXPECT_TRUE(segments.is_sequence());
  EXPECT_EQ(traces.size(), 1U);
  EXPECT_TRUE(root.get("allocator_settings").is_dict());

  // Segments: no overlap, blocks contiguous and covering, sizes summed from the blocks.
  std::map<std::uint64_t, std::uint64_t> seg_ranges;
  std::map<std::uint64_t, std::size_t> active_blocks;  // address -> requested
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const pickle_ref seg = segments.at(i);
    const auto addr = static_cast<std::uint64_t>(seg.get("address").as_int());
    const auto total = static_cast<std::size_t>(seg.get("total_size").as_int());
    EXPECT_EQ(seg.get("device").as_int(), 0);
    EXPECT_TRUE(seg.get("segment_type").as_str() == "large" || seg.get("segment_type").as_str() == "small");
    EXPECT_TRUE(seg.get("segment_pool_id").is_sequence());
    EXPECT_TRUE(seg.get("is_expandable").is_int());
    EXPECT_TRUE(seg.get("frames").is_sequence());
    EXPECT_GT(total, 0U);
    seg_ranges.emplace(addr, addr + total);
    std::uint64_t cursor = addr;
    std::size_t allocated = 0, active = 0, requested = 0;
    const pickle_ref blocks = seg.get("blocks");
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      const pickle_ref b = blocks.at(k);
      const auto baddr = static_cast<std::uint64_t>(b.get("address").as_int());
      const auto size = static_cast<std::size_t>(b.get("size").as_int());
      const auto req = static_cast<std::size_t>(b.get("requested_size").as_int());
      const std::string_view state = b.get("state").as_str();
      EXPECT_EQ(baddr, cursor) << "segment " << addr << " block " << k;
      EXPECT_LE(req, size);
      cursor += size;
      if (state == "active_allocated") {
        allocated += size;
        out.viz_allocated += req;
      } else {
        EXPECT_TRUE(state == "active_pending_free" || state == "inactive") << state;
      }
      if (state != "inactive") {
        active += size;
        requested += req;
        active_blocks.emplace(baddr, req);
      } else {
        EXPECT_EQ(req, 0U);
      }
    }
    EXPECT_EQ(cursor, addr + total) << "the blocks of segment " << addr << " do not cover it";
    EXPECT_EQ(static_cast<std::size_t>(seg.get("allocated_size").as_int()), allocated);
    EXPECT_EQ(static_cast<std::size_t>(seg.get("active_size").as_int()), active);
    EXPECT_EQ(static_cast<std::size_t>(seg.get("requested_size").as_int()), requested);
    out.segment_bytes += total;
  }
  std::uint64_t previous_end = 0;
  for (const auto& [lo, hi] : seg_ranges) {
    EXPECT_GE(lo, previous_end) << "segments overlap at " << lo;
    previous_end = hi;
  }

  // The device trace, replayed: allocations inside mapped memory, frees of live blocks with the
  // alloc's size, segment frees of whole segments, unmaps of mapped memory.
  range_set mapped;
  std::map<std::uint64_t, std::size_t> whole;  // segment_alloc'd, address -> bytes
  std::map<std::uint64_t, std::size_t> live;   // address -> requested
  std::set<std::uint64_t> pending;             // free_requested, not completed
  std::size_t reserved = 0;
  std::uint64_t last_time = 0;
  const pickle_ref entries = traces.at(0);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const pickle_ref e = entries.at(i);
    const std::string action(e.get("action").as_str());
    const auto addr = static_cast<std::uint64_t>(e.get("addr").as_int());
    const auto size = static_cast<std::size_t>(e.get("size").as_int());
    const auto time = static_cast<std::uint64_t>(e.get("time_us").as_int());
    EXPECT_TRUE(e.get("frames").is_sequence());
    EXPECT_TRUE(e.get("stream").is_int());
    EXPECT_GE(time, last_time) << "entry " << i;
    last_time = time;
    const std::string where = "entry " + std::to_string(i) + " (" + action + " " + std::to_string(addr) + ")";
    if (action == "alloc") {
      EXPECT_TRUE(mapped.covers(addr, addr + std::max<std::size_t>(size, 1))) << where << " outside mapped memory";
      EXPECT_TRUE(live.emplace(addr, size).second) << where << " on a live block";
    } else if (action == "free_requested") {
      const auto it = live.find(addr);
      EXPECT_TRUE(it != live.end() && it->second == size) << where;
      EXPECT_TRUE(pending.insert(addr).second) << where;
    } else if (action == "free_completed") {
      const auto it = live.find(addr);
      EXPECT_TRUE(it != live.end() && it->second == size) << where;
      EXPECT_EQ(pending.erase(addr), 1U) << where << " without free_requested";
      if (it != live.end()) live.erase(it);
    } else if (action == "segment_alloc" || action == "segment_map") {
      EXPECT_FALSE(mapped.covers(addr, addr + 1)) << where << " maps mapped memory";
      mapped.add(addr, addr + size);
      if (action == "segment_alloc") whole.emplace(addr, size);
      reserved += size;
    } else if (action == "segment_free" || action == "segment_unmap") {
      EXPECT_TRUE(mapped.covers(addr, addr + size)) << where << " releases unmapped memory";
      if (action == "segment_free") {
        const auto it = whole.find(addr);
        EXPECT_TRUE(it != whole.end() && it->second == size) << where << " frees no segment of that size";
        if (it != whole.end()) whole.erase(it);
      }
      for (const auto& [a, s] : live) {
        EXPECT_FALSE(a < addr + size && a + std::max<std::size_t>(s, 1) > addr) << where << " under a live block";
      }
      mapped.remove(addr, addr + size);
      EXPECT_GE(reserved, size) << where;
      reserved -= std::min(reserved, size);
    } else if (action == "oom") {
      ++out.ooms;
      EXPECT_EQ(static_cast<std::size_t>(e.get("device_free").as_int()), capacity - reserved) << where;
    } else {
      ADD_FAILURE() << where << ": not an action of PyTorch's device trace";
    }
    out.peak_reserved = std::max(out.peak_reserved, reserved);
  }
  out.final_reserved = reserved;
  // What is live at the end of the trace is what the segments hold.
  std::map<std::uint64_t, std::size_t> active_live = live;
  EXPECT_EQ(active_live, active_blocks);
  return out;
}

class PlacedExportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PlacedExportTest, BundledTraceExportIsTheReplaysLayout) {
  const trace t = bundled_trace();
  ASSERT_FALSE(t.events.empty());
  replay_options options;
  auto placed = replay_placed(t, GetParam(), options);
  ASSERT_TRUE(placed.has_value()) << placed.error();
  // What `phasealloc replay --policy` reports, from a replay without observers.
  auto plain = replay(t, GetParam(), options);
  ASSERT_TRUE(plain.has_value()) << plain.error();
  const replay_result& r = plain.value();
  EXPECT_EQ(placed.value().result.final_reserved_bytes, r.final_reserved_bytes);
  EXPECT_EQ(placed.value().result.peak_reserved_bytes, r.peak_reserved_bytes);

  const checked c = check_pickle(export_placed_snapshot(placed.value().layout), options.capacity_bytes);
  EXPECT_GT(c.segment_bytes, 0U);
  EXPECT_EQ(c.segment_bytes, r.final_reserved_bytes);
  EXPECT_EQ(c.final_reserved, r.final_reserved_bytes);
  EXPECT_EQ(c.peak_reserved, r.peak_reserved_bytes);
  EXPECT_EQ(c.viz_allocated, r.final_requested_bytes);  // no free is pending at the end of a replay
  EXPECT_EQ(c.ooms, 0U);

  // PyTorch's importer reads the export back as the same allocations and frees, with phases.
  auto back = import_snapshot(std::string_view(export_placed_snapshot(placed.value().layout)), "export");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  std::size_t allocs = 0, back_allocs = 0;
  for (const trace_event& e : t.events) allocs += e.op == trace_event_op::alloc ? 1 : 0;
  for (const trace_event& e : back.value().events) back_allocs += e.op == trace_event_op::alloc ? 1 : 0;
  EXPECT_EQ(back_allocs, allocs);
}

INSTANTIATE_TEST_SUITE_P(Policies, PlacedExportTest,
                         ::testing::Values("pytorch", "phasealloc", "pytorch:expandable_segments:True", "basic"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace_if(name.begin(), name.end(), [](char ch) { return !std::isalnum(ch); }, '_');
                           return name;
                         });

// Out of memory, empty_cache and releases on a small device, random traces: still well-formed,
// and the oom entries carry the device's free bytes.
TEST(PlacedExportRandomTest, SmallDeviceWithOomsAndReleases) {
  std::size_t ooms = 0;
  for (const std::string policy : {"pytorch", "phasealloc", "pytorch:expandable_segments:True"}) {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      trace t = testing::random_valid_trace(seed, 3000);
      for (std::size_t i = 500; i < t.events.size(); i += 700) {
        t.events[i].op = trace_event_op::empty_cache;  // replaces a non-alloc sometimes; keep it valid:
        t.events[i].alloc_id = 0;
      }
      // The edit above may have dropped an alloc or free: repair by removing frees of unknown ids.
      std::set<std::uint64_t> known;
      std::vector<trace_event> kept;
      for (const trace_event& e : t.events) {
        if (e.op == trace_event_op::alloc) known.insert(e.alloc_id);
        if ((e.op == trace_event_op::free || e.op == trace_event_op::record_stream) && known.count(e.alloc_id) == 0) {
          continue;
        }
        if (e.op == trace_event_op::free) known.erase(e.alloc_id);
        kept.push_back(e);
      }
      t.events = std::move(kept);
      replay_options options;
      options.capacity_bytes = std::size_t{6} << 30;
      auto placed = replay_placed(t, policy, options);
      ASSERT_TRUE(placed.has_value()) << placed.error();
      const replay_result& r = placed.value().result;
      SCOPED_TRACE(policy + " seed " + std::to_string(seed));
      const checked c = check_pickle(export_placed_snapshot(placed.value().layout), options.capacity_bytes);
      EXPECT_EQ(c.segment_bytes, r.final_reserved_bytes);
      EXPECT_EQ(c.final_reserved, r.final_reserved_bytes);
      EXPECT_EQ(c.peak_reserved, r.peak_reserved_bytes);
      EXPECT_EQ(c.ooms, static_cast<std::size_t>(r.ooms));
      ooms += c.ooms;
    }
  }
  EXPECT_GT(ooms, 0U) << "the random traces were meant to run out of memory";
}

trace_record record(trace_op op, std::uint64_t addr, std::size_t bytes, std::size_t requested = 0) {
  trace_record r;
  r.op = op;
  r.addr = addr;
  r.block_bytes = bytes;
  r.requested_bytes = requested;
  return r;
}

std::string actions(const std::vector<placed_trace_entry>& entries) {
  std::string out;
  for (const placed_trace_entry& e : entries) {
    out += (out.empty() ? "" : " ") + e.action + "@" + std::to_string(e.addr) + ":" + std::to_string(e.size);
  }
  return out;
}

// The engine's releases the replays above do not reach: a whole segment freed after some of its
// pages were given back, and an expandable reservation freed while pages are mapped. PyTorch's
// trace has only segment_unmap for those: the entries must still add up.
TEST(TorchTraceRecorderTest, ReleasesWithHolesBecomeUnmapsOfTheMappedRuns) {
  std::vector<placed_trace_entry> entries;
  std::uint64_t now_ns = 5000;
  torch_trace_recorder rec(entries, 1000, &now_ns);
  rec.on_event(record(trace_op::segment_alloc, 100, 100));
  rec.on_event(record(trace_op::alloc, 100, 16, 10));
  rec.on_event(record(trace_op::free_requested, 100, 16, 10));
  rec.on_event(record(trace_op::free_completed, 100, 16));  // the engine gives the block bytes
  rec.on_event(record(trace_op::segment_unmap, 140, 20));
  rec.on_event(record(trace_op::segment_free, 100, 100));  // 80 bytes were still mapped
  EXPECT_EQ(actions(entries),
            "segment_alloc@100:100 alloc@100:10 free_requested@100:10 free_completed@100:10 "
            "segment_unmap@140:20 segment_unmap@100:40 segment_unmap@160:40");
  EXPECT_EQ(rec.reserved_bytes(), 0U);
  EXPECT_EQ(entries.front().time_us, 5U);

  entries.clear();
  rec.on_event(record(trace_op::segment_map, 1000, 50));  // an expandable reservation at 1000
  rec.on_event(record(trace_op::segment_map, 1050, 50));
  rec.on_event(record(trace_op::segment_map, 1200, 30));
  rec.on_event(record(trace_op::segment_unmap, 1020, 10));
  EXPECT_EQ(rec.reserved_bytes(), 120U);
  rec.on_event(record(trace_op::oom, 0, 900, 880));
  rec.on_event(record(trace_op::segment_free, 1000, 4000));  // the reservation, never segment_alloc'd
  EXPECT_EQ(actions(entries),
            "segment_map@1000:50 segment_map@1050:50 segment_map@1200:30 segment_unmap@1020:10 oom@880:900 "
            "segment_unmap@1000:20 segment_unmap@1030:70 segment_unmap@1200:30");
  EXPECT_EQ(entries.at(4).device_free, 880U);
  EXPECT_EQ(rec.reserved_bytes(), 0U);
  rec.on_event(record(trace_op::segment_free, 9000, 4000));  // nothing mapped: no entry
  EXPECT_EQ(entries.size(), 8U);
}

TEST(PlacedExportErrorTest, UnknownPolicyIsNamed) {
  trace t;
  t.events = {make_event(trace_event_op::alloc, 0, 0, 100), make_event(trace_event_op::free, 1, 0, 100)};
  auto placed = replay_placed(t, "bogus:x:1");
  ASSERT_FALSE(placed.has_value());
  EXPECT_NE(placed.error().find("bogus"), std::string::npos) << placed.error();
  EXPECT_NE(placed.error().find("pytorch"), std::string::npos) << placed.error();  // lists the valid ones
}

}  // namespace
}  // namespace phasealloc
