#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "phasealloc/import/pickle_reader.hpp"
#include "phasealloc/export/snapshot_exporter.hpp"
#include "phasealloc/import/snapshot_importer.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

using testing::make_event;
using testing::random_valid_trace;

// The caller-visible sequence a replay follows: op, id, size, stream (not time, not seeds).
struct step {
  trace_event_op op;
  std::uint64_t id;
  std::uint64_t bytes;
  std::uint32_t stream;
  friend bool operator==(const step&, const step&) = default;
};

// Stream ordinals are compared up to renumbering in order of first sight (an importer numbers
// them that way; a hand-made trace need not).
std::vector<step> alloc_free_sequence(const trace& t) {
  std::vector<step> out;
  std::map<std::uint32_t, std::uint32_t> streams;
  for (const auto& e : t.events) {
    if (e.op == trace_event_op::alloc || e.op == trace_event_op::free || e.op == trace_event_op::oom) {
      const auto [it, inserted] = streams.try_emplace(e.stream, static_cast<std::uint32_t>(streams.size()));
      out.push_back({e.op, e.alloc_id, e.bytes, it->second});
    }
  }
  return out;
}

trace reimport(const trace& t, const snapshot_export_options& options = {}) {
  const auto bytes = export_snapshot(t, options);
  EXPECT_TRUE(bytes.has_value()) << (bytes ? "" : bytes.error().message());
  if (!bytes) return {};
  auto back = import_snapshot(std::string_view(bytes.value()), "exported.pickle");
  EXPECT_TRUE(back.has_value()) << (back ? "" : back.error().message());
  if (!back) return {};
  const auto v = validate(back.value());
  EXPECT_TRUE(v.has_value()) << (v ? "" : v.error().message());
  return std::move(back).value();
}

TEST(SnapshotExporterTest, RoundTripKeepsTheAllocFreeSequence) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const trace t = random_valid_trace(seed, 400);
    const trace back = reimport(t);
    EXPECT_EQ(alloc_free_sequence(back), alloc_free_sequence(t)) << "seed " << seed;
    // Nothing needed seeding: every allocation was exported as an alloc.
    EXPECT_EQ(*find_property(back.meta, "import.seeded_allocs"), "0");
  }
}

TEST(SnapshotExporterTest, RoundTripKeepsPhasesAndMicroseconds) {
  trace t;
  t.strings = {"generation", "training"};
  t.events = {make_event(trace_event_op::phase, 0, 0, 0, 0, 0, 0), make_event(trace_event_op::alloc, 1500, 0, 100),
              make_event(trace_event_op::phase, 2000, 0, 0, 0, 0, 1), make_event(trace_event_op::free, 7000, 0, 100)};
  trace back = reimport(t);
  EXPECT_EQ(back.strings, t.strings);
  // The covering segment and its layout (it is in `segments` but never allocated in the history).
  std::erase_if(back.events, [](const trace_event& e) {
    return e.op == trace_event_op::segment_alloc || e.op == trace_event_op::seed_block;
  });
  const std::vector<trace_event> expected = {
      make_event(trace_event_op::phase, 0, 0, 0, 0, 0, 0), make_event(trace_event_op::alloc, 0, 0, 100),
      make_event(trace_event_op::phase, 6000, 0, 0, 0, 0, 1), make_event(trace_event_op::free, 6000, 0, 100)};
  EXPECT_EQ(back.events, expected) << "time is relative to the first entry, in whole microseconds";
}

TEST(SnapshotExporterTest, LiveBlocksSitInOneCoveringSegment) {
  trace t;
  t.events = {make_event(trace_event_op::alloc, 0, 0, 100), make_event(trace_event_op::alloc, 1000, 1, 1000),
              make_event(trace_event_op::alloc, 2000, 2, 512), make_event(trace_event_op::free, 3000, 1, 1000)};
  const auto bytes = export_snapshot(t);
  ASSERT_TRUE(bytes.has_value());
  const auto doc = read_pickle(bytes.value(), "exported");
  ASSERT_TRUE(doc.has_value()) << doc.error().message();
  const pickle_ref root = doc.value().root();
  ASSERT_EQ(root.get("segments").size(), 1U);
  const pickle_ref seg = root.get("segments").at(0);
  EXPECT_EQ(seg.get("total_size").as_int(), 512 + 1024 + 512);
  const pickle_ref blocks = seg.get("blocks");
  ASSERT_EQ(blocks.size(), 3U);  // live 100, the freed 1000 as a gap, live 512
  EXPECT_EQ(blocks.at(0).get("state").as_str(), "active_allocated");
  EXPECT_EQ(blocks.at(0).get("requested_size").as_int(), 100);
  EXPECT_EQ(blocks.at(1).get("state").as_str(), "inactive");
  EXPECT_EQ(blocks.at(1).get("size").as_int(), 1024);
  EXPECT_EQ(blocks.at(2).get("address").as_int(), seg.get("address").as_int() + 1536);
  // Frees are written as free_requested + free_completed, like PyTorch.
  const pickle_ref entries = root.get("device_traces").at(0);
  ASSERT_EQ(entries.size(), 5U);
  EXPECT_EQ(entries.at(3).get("action").as_str(), "free_requested");
  EXPECT_EQ(entries.at(4).get("action").as_str(), "free_completed");
  EXPECT_EQ(entries.at(4).get("addr").as_int(), entries.at(1).get("addr").as_int());
  EXPECT_TRUE(root.get("allocator_settings").is_dict());
}

TEST(SnapshotExporterTest, UsesReplayAddressesWhenGiven) {
  trace t;
  t.events = {make_event(trace_event_op::alloc, 0, 0, 100), make_event(trace_event_op::alloc, 0, 1, 100),
              make_event(trace_event_op::free, 0, 0, 100), make_event(trace_event_op::alloc, 0, 2, 100)};
  const std::vector<std::uint64_t> addresses = {0x1000, 0x1200, 0x1000};  // id 2 reuses id 0's block
  snapshot_export_options options;
  options.alloc_addresses = addresses;
  options.device = 1;
  const auto bytes = export_snapshot(t, options);
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  const auto doc = read_pickle(bytes.value(), "exported");
  const pickle_ref traces = doc.value().root().get("device_traces");
  ASSERT_EQ(traces.size(), 2U);
  EXPECT_EQ(traces.at(0).size(), 0U);
  EXPECT_EQ(traces.at(1).at(4).get("addr").as_int(), 0x1000);
  EXPECT_EQ(doc.value().root().get("segments").at(0).get("device").as_int(), 1);

  snapshot_import_options device1;
  device1.device = 1;
  const auto back = import_snapshot(std::string_view(bytes.value()), "exported", device1);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(alloc_free_sequence(back.value()), alloc_free_sequence(t));

  const std::vector<std::uint64_t> too_few = {0x1000};
  options.alloc_addresses = too_few;
  const auto missing = export_snapshot(t, options);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("an address for allocation id 1"), std::string::npos);
}

TEST(SnapshotExporterTest, RefusesAnInvalidTrace) {
  trace t;
  t.events = {make_event(trace_event_op::free, 0, 3, 100)};
  const auto r = export_snapshot(t);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("allocation id 3 is not live"), std::string::npos) << r.error().message();
}

TEST(SnapshotExporterTest, RealSnapshotSurvivesExportAndImport) {
#ifdef PHASEALLOC_SHARED_TRACES_DIR
  const auto path = std::filesystem::path(PHASEALLOC_SHARED_TRACES_DIR) / "cs336_memory_forward_fp32_128.pickle";
  ASSERT_TRUE(std::filesystem::exists(path)) << "no snapshots at " << path << " (they ship in tests/data/snapshots)";
  const auto t = import_snapshot_file(path);
  ASSERT_TRUE(t.has_value()) << t.error().message();
  const trace back = reimport(t.value());
  EXPECT_EQ(alloc_free_sequence(back), alloc_free_sequence(t.value()));
#else
  FAIL() << "built without PHASEALLOC_SHARED_TRACES_DIR";
#endif
}

// PyTorch's memory_viz reads the pickle with the standard library: check that it can.
TEST(SnapshotExporterTest, PythonsPickleLoadsTheExport) {
  ASSERT_EQ(std::system("command -v python3 >/dev/null 2>&1"), 0) << "no python3 on this machine (tools/dev.sh deps)";
  const auto path = std::filesystem::temp_directory_path() / "phasealloc_exporter_test.pickle";
  ASSERT_TRUE(export_snapshot_file(random_valid_trace(3, 200), path).has_value());
  const std::string script =
      "import pickle,sys\n"
      "class U(pickle.Unpickler):\n"
      "    def find_class(self, m, n): raise RuntimeError(m + '.' + n)\n"
      "s = U(open(sys.argv[1], 'rb')).load()\n"
      "assert set(s) >= {'segments', 'device_traces', 'allocator_settings'}, s.keys()\n"
      "t = s['device_traces'][0]\n"
      "assert all(e['action'] in ('alloc', 'free_requested', 'free_completed', 'oom') for e in t)\n"
      "assert all(isinstance(e['addr'], int) and isinstance(e['frames'], list) for e in t)\n"
      "for seg in s['segments']:\n"
      "    assert sum(b['size'] for b in seg['blocks']) == seg['total_size']\n";
  const auto script_path = std::filesystem::temp_directory_path() / "phasealloc_exporter_check.py";
  std::ofstream(script_path) << script;
  const int rc = std::system(("python3 " + script_path.string() + " " + path.string()).c_str());
  std::filesystem::remove(path);
  std::filesystem::remove(script_path);
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace phasealloc
