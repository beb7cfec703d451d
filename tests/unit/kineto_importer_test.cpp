#include <gtest/gtest.h>

#include <filesystem>

#include "phasealloc/import/kineto_importer.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

using testing::make_event;

const std::filesystem::path fixture = std::filesystem::path(PHASEALLOC_TEST_DATA_DIR) / "kineto_memory_profile.json";

std::string prop(const trace& t, std::string_view key) {
  const std::string* v = find_property(t.meta, key);
  return v == nullptr ? "<absent>" : *v;
}

TEST(KinetoImporterTest, ImportsCudaMemoryEventsOfTheFirstDevice) {
  const auto r = import_kineto_file(fixture);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  const trace& t = r.value();
  const auto v = validate(t);
  EXPECT_TRUE(v.has_value()) << v.error().message();
  // Ordered by ts (the two frees are out of order in the file); the free of an address allocated
  // before profiling is seeded; the CPU event and the device-1 event are left out. Total Reserved
  // is a seeded segment (its first value) and a segment_map for each rise.
  const std::vector<trace_event> expected = {
      make_event(trace_event_op::segment_alloc, 0, 0, 2097152, 0, 0, 0, trace_flag::seeded),
      make_event(trace_event_op::alloc, 0, 0, 512, 0, 0, 0, trace_flag::seeded),
      make_event(trace_event_op::alloc, 0, 1, 4096),
      make_event(trace_event_op::alloc, 500, 2, 1048576),
      make_event(trace_event_op::segment_map, 1250, 0, 20971520),
      make_event(trace_event_op::alloc, 1250, 3, 8388608),
      make_event(trace_event_op::free, 1750, 0, 512),
      make_event(trace_event_op::free, 2000, 1, 4096),
      make_event(trace_event_op::oom, 3000, 0, 85899345920ULL),
      make_event(trace_event_op::free, 4000, 2, 1048576),
      make_event(trace_event_op::alloc, 5000, 4, 2048),
  };
  EXPECT_EQ(t.events, expected);
  EXPECT_EQ(t.meta.device_capacity_bytes, 85029158912ULL);
  EXPECT_EQ(t.meta.stream_count, 1U);
  EXPECT_EQ(prop(t, "kineto.device_id"), "0");
  EXPECT_EQ(prop(t, "kineto.devices"), "0:8,1:1");
  EXPECT_EQ(prop(t, "kineto.memory_events"), "8");
  EXPECT_EQ(prop(t, "kineto.peak_total_reserved_bytes"), "23068672");
  EXPECT_EQ(prop(t, "kineto.peak_total_allocated_bytes"), "9441280");
  EXPECT_EQ(prop(t, "import.seeded_allocs"), "1");
  EXPECT_NE(t.meta.source.find("kineto_memory_profile.json"), std::string::npos);
  EXPECT_EQ(summarize(t).final_live_bytes, 8388608U + 2048U);
}

TEST(KinetoImporterTest, SelectsAnotherDevice) {
  kineto_import_options options;
  options.device_id = 1;
  const auto r = import_kineto_file(fixture, options);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  ASSERT_EQ(r.value().events.size(), 2U);
  EXPECT_EQ(r.value().events[0], make_event(trace_event_op::segment_alloc, 0, 0, 2097152, 0, 0, 0, trace_flag::seeded));
  EXPECT_EQ(r.value().events[1], make_event(trace_event_op::alloc, 0, 0, 1024));
  EXPECT_EQ(r.value().meta.device_capacity_bytes, 0U) << "no deviceProperties entry for device 1";
}

TEST(KinetoImporterTest, AcceptsABareArrayAndNumericStrings) {
  const std::string json = R"([
    {"ph": "i", "name": "[memory]", "ts": 10, "args": {"Device Type": "1", "Device Id": "0", "Addr": "4096", "Bytes": "512"}},
    {"ph": "i", "name": "[memory]", "ts": 12.5, "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": -512}},
    {"ph": "X", "name": "aten::add", "ts": 11, "dur": 1, "args": {}}
  ])";
  const auto r = import_kineto(json, "bare.json");
  ASSERT_TRUE(r.has_value()) << r.error().message();
  ASSERT_EQ(r.value().events.size(), 2U);
  EXPECT_EQ(r.value().events[1], make_event(trace_event_op::free, 2500, 0, 512));
}

TEST(KinetoImporterTest, MalformedJsonNamesTheByte) {
  const auto r = import_kineto(R"({"traceEvents": [ {"ph": "i",, ]})", "broken.json");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().file, "broken.json");
  EXPECT_EQ(r.error().offset, 29U);
  EXPECT_NE(r.error().message().find("broken.json: byte 29: expected valid JSON"), std::string::npos)
      << r.error().message();
}

TEST(KinetoImporterTest, BadFieldsNameTheMemoryEvent) {
  const auto no_args = import_kineto(R"({"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1}]})", "a.json");
  ASSERT_FALSE(no_args.has_value());
  EXPECT_NE(no_args.error().message().find("memory event 0: an 'args' object"), std::string::npos);
  const auto no_ts = import_kineto(
      R"({"traceEvents": [{"ph": "i", "name": "[memory]", "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": 1}}]})",
      "b.json");
  ASSERT_FALSE(no_ts.has_value());
  EXPECT_NE(no_ts.error().message().find("'ts'"), std::string::npos);
  const auto not_trace = import_kineto(R"({"foo": 1})", "c.json");
  ASSERT_FALSE(not_trace.has_value());
  EXPECT_NE(not_trace.error().message().find("'traceEvents'"), std::string::npos);
  EXPECT_FALSE(import_kineto("42", "d.json").has_value());
  EXPECT_FALSE(import_kineto_file("/nonexistent/trace.json").has_value());
}

}  // namespace
}  // namespace phasealloc
