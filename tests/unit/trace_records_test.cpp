// The records encoding (trace_records.hpp): what its header says and where every field of every
// event lies, read back here the way phasealloc.torch_replay reads it (JSON, then fixed offsets).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_records.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

std::string records_of(const trace& t) {
  std::ostringstream out;
  auto written = write_trace_records(t, out, "memory");
  EXPECT_TRUE(written) << written.error().message();
  return out.str();
}

template <typename T>
T get_le(std::string_view bytes, std::size_t offset) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return static_cast<T>(v);
}

TEST(TraceRecordsTest, HeaderDescribesTheRecordsThatFollow) {
  trace t = testing::random_valid_trace(7, 3000);
  t.meta.allocator_settings = "expandable_segments:True";
  t.meta.device_capacity_bytes = 80ULL << 30;
  t.meta.properties = {{"pytorch.layout", "current"}, {"pytorch.layout", "again"}};
  for (std::size_t op = 0; op < trace_event_op_count; ++op) {  // every op, every field at full width
    t.events.push_back(testing::make_event(static_cast<trace_event_op>(op), ~0ULL - op, (1ULL << 63) + op, ~0ULL - 7,
                                           0xfffffff0U + static_cast<std::uint32_t>(op), 0xfedcba98U, 0x89abcdefU,
                                           static_cast<std::uint8_t>(trace_flag::all - op)));
  }
  const std::string bytes = records_of(t);
  const std::size_t eol = bytes.find('\n');
  ASSERT_NE(eol, std::string::npos);
  const auto header = nlohmann::json::parse(bytes.substr(0, eol));
  EXPECT_EQ(header["format"], "phasealloc-trace-records");
  EXPECT_EQ(header["version"], trace_records_version);
  EXPECT_EQ(header["trace_version"], t.version);
  EXPECT_EQ(header["events"], t.events.size());
  EXPECT_EQ(header["record_bytes"], 40);
  EXPECT_EQ(header["record"], "<BBxxIQQQII");
  EXPECT_EQ(header["fields"],
            nlohmann::json({"op", "flags", "stream", "time_ns", "alloc_id", "bytes", "tag", "name"}));
  ASSERT_EQ(header["ops"].size(), trace_event_op_count);
  for (std::size_t op = 0; op < trace_event_op_count; ++op) {
    EXPECT_EQ(header["ops"][op], to_string(static_cast<trace_event_op>(op)));
  }
  EXPECT_EQ(header["strings"], nlohmann::json(t.strings));
  EXPECT_EQ(header["meta"]["source"], t.meta.source);
  EXPECT_EQ(header["meta"]["allocator_settings"], "expandable_segments:True");
  EXPECT_EQ(header["meta"]["device_capacity_bytes"], 80ULL << 30);
  EXPECT_EQ(header["meta"]["stream_count"], t.meta.stream_count);
  EXPECT_EQ(header["meta"]["properties"],
            nlohmann::json::parse(R"([["pytorch.layout", "current"], ["pytorch.layout", "again"]])"));

  const std::string_view body = std::string_view(bytes).substr(eol + 1);
  ASSERT_EQ(body.size(), t.events.size() * trace_records_record_bytes);
  std::size_t ops_seen = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const std::size_t at = i * trace_records_record_bytes;
    const trace_event& e = t.events[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(get_le<std::uint8_t>(body, at + 0), static_cast<std::uint8_t>(e.op));
    EXPECT_EQ(get_le<std::uint8_t>(body, at + 1), e.flags);
    EXPECT_EQ(get_le<std::uint16_t>(body, at + 2), 0);
    EXPECT_EQ(get_le<std::uint32_t>(body, at + 4), e.stream);
    EXPECT_EQ(get_le<std::uint64_t>(body, at + 8), e.time_ns);
    EXPECT_EQ(get_le<std::uint64_t>(body, at + 16), e.alloc_id);
    EXPECT_EQ(get_le<std::uint64_t>(body, at + 24), e.bytes);
    EXPECT_EQ(get_le<std::uint32_t>(body, at + 32), e.tag);
    EXPECT_EQ(get_le<std::uint32_t>(body, at + 36), e.name);
    ops_seen |= std::size_t{1} << static_cast<unsigned>(e.op);
  }
  EXPECT_EQ(ops_seen, (std::size_t{1} << trace_event_op_count) - 1);
}

TEST(TraceRecordsTest, AnEmptyTraceIsAHeaderLineAlone) {
  const std::string bytes = records_of(trace{});
  EXPECT_EQ(bytes.find('\n'), bytes.size() - 1);
  EXPECT_EQ(nlohmann::json::parse(bytes)["events"], 0);
}

TEST(TraceRecordsTest, AStringThatIsNotUtf8IsNamed) {
  trace t;
  t.strings = {"", std::string("gen\xff", 4)};
  std::ostringstream out;
  auto written = write_trace_records(t, out, "out.records");
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().message(),
            "out.records: byte 0: expected string 1 to be valid UTF-8 (records carry it as JSON), found other bytes");
  EXPECT_TRUE(out.str().empty());

  trace p;
  p.meta.properties = {{"k", std::string("\xc3", 1)}};
  auto property = write_trace_records(p, out, "out.records");
  ASSERT_FALSE(property);
  EXPECT_NE(property.error().message().find("the value of property \"k\""), std::string::npos);
}

TEST(TraceRecordsTest, SaveTraceWritesRecordsThatNoTraceReaderTakes) {
  const auto dir = std::filesystem::temp_directory_path() / ("trace_records_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const trace t = testing::random_valid_trace(3, 200);
  const auto path = dir / "t.records";
  auto saved = save_trace(path, t, trace_file_format::records);
  ASSERT_TRUE(saved) << saved.error().message();
  auto bytes = load_trace(path);
  EXPECT_FALSE(bytes);  // an export for other languages: phasealloc reads the trace itself
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), records_of(t));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace phasealloc
