#include <gtest/gtest.h>

#include <filesystem>

#include "phasealloc/import/rmm_log_importer.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

using testing::make_event;

const std::filesystem::path fixture = std::filesystem::path(PHASEALLOC_TEST_DATA_DIR) / "rmm_log.csv";

std::string prop(const trace& t, std::string_view key) {
  const std::string* v = find_property(t.meta, key);
  return v == nullptr ? "<absent>" : *v;
}

TEST(RmmLogImporterTest, ImportsTheFixture) {
  const auto r = import_rmm_log_file(fixture);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  const trace& t = r.value();
  const auto v = validate(t);
  EXPECT_TRUE(v.has_value()) << v.error().message();
  // Streams "0", "55d0c8a1f2b0" (hex, no prefix) and "0x7f00000010" become ordinals 0, 1, 2.
  // Midnight passes between the second and third rows. The pointer freed but never allocated in
  // the log is seeded; the reused pointer 0x7f8a40000000 gets a new id.
  const std::vector<trace_event> expected = {
      make_event(trace_event_op::alloc, 0, 0, 4096, 1, 0, 0, trace_flag::seeded),
      make_event(trace_event_op::alloc, 0, 1, 1024, 0),
      make_event(trace_event_op::alloc, 500'000, 2, 2048, 1),
      make_event(trace_event_op::free, 1'250'000, 1, 1024, 0),
      make_event(trace_event_op::oom, 2'000'000, 0, 1ULL << 40, 1),
      make_event(trace_event_op::free, 2'500'000, 0, 4096, 1),
      make_event(trace_event_op::alloc, 3'000'000, 3, 512, 2),
      make_event(trace_event_op::free, 4'000'000, 2, 2048, 1),
  };
  EXPECT_EQ(t.events, expected);
  EXPECT_EQ(t.meta.stream_count, 3U);
  EXPECT_EQ(prop(t, "rmm.rows"), "7");
  EXPECT_EQ(prop(t, "import.seeded_allocs"), "1");
}

TEST(RmmLogImporterTest, AcceptsNoHeaderEpochSecondsAndNullAllocations) {
  const std::string csv =
      "1,1634567890.5,allocate,0x10,8,0\r\n"
      "1,1634567890.75,allocate,(nil),0,0\r\n"
      "\n"
      "1,1634567891,deallocate,10,8,0\r\n";
  const auto r = import_rmm_log(csv, "epoch.csv");
  ASSERT_TRUE(r.has_value()) << r.error().message();
  ASSERT_EQ(r.value().events.size(), 2U);
  EXPECT_EQ(r.value().events[1], make_event(trace_event_op::free, 500'000'000, 0, 8));
  EXPECT_EQ(prop(r.value(), "rmm.null_allocations"), "1");
}

TEST(RmmLogImporterTest, ErrorsNameTheLine) {
  const std::string header = "Thread,Time,Action,Pointer,Size,Stream\n";
  const auto bad_time = import_rmm_log(header + "1,10:61:00.0,allocate,0x1,1,0\n", "t.csv");
  ASSERT_FALSE(bad_time.has_value());
  EXPECT_EQ(bad_time.error().line, 2U);
  EXPECT_EQ(bad_time.error().offset, header.size());
  EXPECT_NE(bad_time.error().message().find("t.csv:2: expected a Time"), std::string::npos)
      << bad_time.error().message();
  const auto bad_action = import_rmm_log(header + "1,10:00:00.0,realloc,0x1,1,0\n", "a.csv");
  EXPECT_NE(bad_action.error().message().find("'realloc'"), std::string::npos);
  const auto bad_fields = import_rmm_log(header + "1,10:00:00.0,allocate,0x1,1\n", "f.csv");
  EXPECT_NE(bad_fields.error().message().find("found 5"), std::string::npos);
  const auto bad_stream = import_rmm_log(header + "1,10:00:00.0,allocate,0x1,1,zz\n", "s.csv");
  EXPECT_NE(bad_stream.error().message().find("hex Stream"), std::string::npos);
  const auto bad_header = import_rmm_log("Thread,Time,Action\n", "h.csv");
  EXPECT_EQ(bad_header.error().line, 1U);
  const auto bad_size = import_rmm_log("1,10:00:00.0,allocate,0x1,-5,0\n", "z.csv");
  EXPECT_NE(bad_size.error().message().find("decimal Size"), std::string::npos);
}

}  // namespace
}  // namespace phasealloc
