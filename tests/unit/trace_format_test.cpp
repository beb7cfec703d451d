#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "phasealloc/trace/trace_binary.hpp"
#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_format.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_text.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "trace_test_support.hpp"

namespace phasealloc {
namespace {

using testing::make_event;
using testing::random_valid_trace;

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// Every op, every field, odd strings and properties.
trace sample_trace() {
  trace t;
  t.meta.source = "unit \"test\"\n\ttab";
  t.meta.allocator_settings = "expandable_segments:True,max_split_size_mb:128";
  t.meta.device_capacity_bytes = 80ULL << 30;
  t.meta.stream_count = 3;
  t.meta.properties = {{"pytorch.layout", "current"}, {"empty", ""}, {"bytes", std::string("a\0b\x7f\xff", 5)}};
  t.strings = {"", "generation", "training # not a comment"};
  t.events = {
      make_event(trace_event_op::segment_alloc, 0, 0, 20 << 20, 0, 0, 0, trace_flag::seeded),
      make_event(trace_event_op::alloc, 0, 0, 4096, 0, 0, 0, trace_flag::seeded),
      make_event(trace_event_op::phase, 0, 0, 0, 0, 0, 1),
      make_event(trace_event_op::alloc, 10, 1, 512, 1, 7),
      make_event(trace_event_op::record_stream, 11, 1, 0, 2),
      make_event(trace_event_op::segment_map, 12, 0, 2 << 20, 1),
      make_event(trace_event_op::free, 20, 1, 512, 1),
      make_event(trace_event_op::phase, 30, 0, 0, 0, 0, 2),
      make_event(trace_event_op::oom, 31, 0, 1ULL << 40, 2),
      make_event(trace_event_op::empty_cache, 32),
      make_event(trace_event_op::segment_unmap, 33, 0, 2 << 20, 1),
      make_event(trace_event_op::segment_free, 34, 0, 20 << 20),
      make_event(trace_event_op::free, 40, 0, 4096),
  };
  return t;
}

TEST(TraceFormatTest, SampleTraceValidates) {
  const auto v = validate(sample_trace());
  EXPECT_TRUE(v.has_value()) << (v ? "" : v.error().message());
}

TEST(TraceFormatTest, BinaryRoundTripsSample) {
  const trace t = sample_trace();
  std::stringstream buffer;
  ASSERT_TRUE(write_trace(t, buffer).has_value());
  const auto back = read_trace(buffer, "sample");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(back.value(), t);
}

TEST(TraceFormatTest, TextRoundTripsSample) {
  const trace t = sample_trace();
  std::stringstream buffer;
  ASSERT_TRUE(write_trace_text(t, buffer).has_value());
  const std::string text = buffer.str();
  EXPECT_EQ(text.rfind("# phasealloc-trace v1\n", 0), 0U);
  EXPECT_NE(text.find("0 alloc 0 4096 0 0 0 seeded\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# \"generation\""), std::string::npos) << "phase lines name their phase";
  const auto back = read_trace_text(buffer, "sample.txt");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(back.value(), t);
}

// Property: any trace (valid or not) survives both codecs, bit for bit.
TEST(TraceFormatTest, RandomTracesRoundTripThroughBothCodecs) {
  std::mt19937_64 rng(20240611);
  auto u64 = [&] {
    switch (rng() % 4) {
      case 0: return rng() % 16;
      case 1: return rng() % 100000;
      case 2: return rng();
      default: return ~std::uint64_t{0} - rng() % 3;
    }
  };
  auto bytes = [&](std::size_t max) {
    std::string s(rng() % max, '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xff);
    return s;
  };
  for (int round = 0; round < 300; ++round) {
    trace t;
    t.version = 1;
    t.meta.source = bytes(20);
    t.meta.allocator_settings = bytes(10);
    t.meta.device_capacity_bytes = u64();
    t.meta.stream_count = static_cast<std::uint32_t>(u64());
    for (std::size_t i = rng() % 4; i > 0; --i) t.meta.properties.push_back({bytes(8), bytes(8)});
    for (std::size_t i = rng() % 5; i > 0; --i) t.strings.push_back(bytes(12));
    for (std::size_t i = rng() % 200; i > 0; --i) {
      trace_event e;
      e.op = static_cast<trace_event_op>(rng() % trace_event_op_count);
      e.flags = rng() % 3 == 0 ? trace_flag::seeded : 0;
      e.time_ns = u64();
      e.alloc_id = u64();
      e.bytes = u64();
      e.stream = static_cast<std::uint32_t>(u64());
      e.tag = static_cast<std::uint32_t>(u64());
      e.name = static_cast<std::uint32_t>(u64());
      t.events.push_back(e);
    }
    const auto binary = decode_trace(encode_trace(t), "random");
    ASSERT_TRUE(binary.has_value()) << "round " << round << ": " << binary.error().message();
    EXPECT_EQ(binary.value(), t) << "round " << round;
    const auto text = parse_trace_text(format_trace_text(t), "random.txt");
    ASSERT_TRUE(text.has_value()) << "round " << round << ": " << text.error().message();
    EXPECT_EQ(text.value(), t) << "round " << round;
  }
}

TEST(TraceFormatTest, RandomValidTracesValidateAndRoundTrip) {
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    const trace t = random_valid_trace(seed, 500);
    const auto v = validate(t);
    ASSERT_TRUE(v.has_value()) << "seed " << seed << ": " << v.error().message();
    EXPECT_EQ(decode_trace(encode_trace(t), "r").value(), t);
    EXPECT_EQ(parse_trace_text(format_trace_text(t), "r").value(), t);
  }
}

TEST(TraceFormatTest, SequentialAllocationsEncodeCompactly) {
  trace t;
  for (std::uint64_t i = 0; i < 10000; ++i) {
    t.events.push_back(make_event(trace_event_op::alloc, i * 1000, i, 2048));
    t.events.push_back(make_event(trace_event_op::free, i * 1000 + 500, i, 2048));
  }
  const std::string bytes = encode_trace(t);
  EXPECT_LE(bytes.size(), 64 + t.events.size() * 6) << "about 5 bytes per event expected";
}

TEST(TraceFormatTest, EveryTruncationOfABinaryTraceIsAnError) {
  const std::string bytes = encode_trace(sample_trace());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const auto r = decode_trace(std::string_view(bytes).substr(0, n), "cut");
    ASSERT_FALSE(r.has_value()) << "prefix of " << n << " bytes decoded";
    EXPECT_LE(r.error().offset, n);
    EXPECT_EQ(r.error().file, "cut");
    EXPECT_FALSE(r.error().expected.empty());
  }
}

TEST(TraceFormatTest, TrailingBytesAreAnError) {
  const std::string bytes = encode_trace(sample_trace()) + "x";
  const auto r = decode_trace(bytes, "tail");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().offset, bytes.size() - 1);
  EXPECT_NE(r.error().message().find("end of the trace"), std::string::npos) << r.error().message();
}

TEST(TraceFormatTest, BadMagicAndFutureVersionAreNamed) {
  const auto magic = decode_trace("not a trace", "x.patrace");
  ASSERT_FALSE(magic.has_value());
  EXPECT_EQ(magic.error().offset, 0U);
  EXPECT_NE(magic.error().message().find("x.patrace: byte 0: expected the binary trace magic"), std::string::npos)
      << magic.error().message();

  std::string future(trace_binary_magic);
  future.push_back(static_cast<char>(trace_format_version + 1));
  const auto version = decode_trace(future, "future");
  ASSERT_FALSE(version.has_value());
  EXPECT_EQ(version.error().offset, 8U);
  EXPECT_NE(version.error().message().find("version " + std::to_string(trace_format_version + 1)), std::string::npos)
      << version.error().message();
}

TEST(TraceFormatTest, HugeCountsDoNotAllocate) {
  // A header that claims 2^62 strings, then nothing: must fail fast on the missing bytes.
  std::string bytes(trace_binary_magic);
  bytes += '\x01';  // version
  bytes += '\x00';  // flags
  bytes += '\x00';  // source ""
  bytes += '\x00';  // settings ""
  bytes += '\x00';  // capacity
  bytes += '\x01';  // stream count
  bytes += '\x00';  // properties
  put_varint(bytes, 1ULL << 62);
  const auto r = decode_trace(bytes, "huge");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("string 0"), std::string::npos) << r.error().message();
}

TEST(TraceFormatTest, OverlongVarintIsAnError) {
  std::string bytes(trace_binary_magic);
  bytes += std::string(11, '\xff');
  const auto r = decode_trace(bytes, "varint");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().offset, 8U);
}

// A bad event in the middle of a long trace (where the decoder reads without bounds checks) is
// worded as one at the end (where every byte is checked).
TEST(TraceFormatTest, BadEventsAreWordedAlikeMidTraceAndAtTheEnd) {
  trace t;
  for (std::uint64_t k = 0; k < 100; ++k) t.events.push_back(make_event(trace_event_op::alloc, 0, k, 1));
  const std::string good = encode_trace(t);
  const std::size_t events_at = good.size() - 4 * 100;  // each event: head, time 0, id 0, bytes 1
  const std::string bad_events[] = {
      std::string("\x0f\x00\x00\x01", 4),                                   // op 15
      std::string(1, '\0') + std::string(9, '\xff') + "\x02" + std::string("\x00\x01", 2),  // time over 64 bits
      std::string("\x20\x00\x00\x01\x80\x80\x80\x80\x10", 9),               // stream 2^32
      std::string("\x10\x00\x00\x01", 4),                                   // flags byte missing at the end
  };
  struct wording {
    std::size_t offset;  // from the event's start
    const char* expected;
    const char* found;
  };
  const wording expected[] = {
      {0, "event {}: an op below 13", "15"},
      {1, "event {} time delta (a varint of at most 64 bits)", "a longer varint"},
      {4, "event {} stream (at most 4294967295)", "4294967296"},
      {0, "", ""},
  };
  for (std::size_t c = 0; c < std::size(bad_events); ++c) {
    for (const std::size_t k : {std::size_t{50}, std::size_t{99}}) {
      std::string bytes = good;
      bytes.replace(events_at + 4 * k, 4, bad_events[c]);
      const auto r = decode_trace(bytes, "mid");
      ASSERT_FALSE(r.has_value()) << c << " " << k;
      if (c == 3) {  // mid-trace the next event's head is read as the flags; at the end, the end of input
        if (k == 99) {
          EXPECT_EQ(r.error().found, "end of input");
        }
        continue;
      }
      EXPECT_EQ(r.error().offset, events_at + 4 * k + expected[c].offset) << c << " " << k;
      EXPECT_EQ(r.error().expected, fmt::format(fmt::runtime(expected[c].expected), k)) << c << " " << k;
      EXPECT_EQ(r.error().found, expected[c].found) << c << " " << k;
    }
  }
}

// Large enough for the decoder's chunked prefaulting and its fast runs (several chunks of 32 Ki
// events), with a checked-path event (a u32 field over 2^32-1 is only refused there) deep inside.
TEST(TraceFormatTest, LargeTracesRoundTripAndFailDeepInside) {
  trace t = random_valid_trace(3, 300000);
  const std::string bytes = encode_trace(t);
  const auto back = decode_trace(bytes, "large");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(back.value(), t);

  trace simple;
  for (std::uint64_t k = 0; k < 200000; ++k) simple.events.push_back(make_event(trace_event_op::alloc, 0, k, 1));
  std::string bad = encode_trace(simple);
  const std::size_t events_at = bad.size() - 4 * 200000;  // each event: head, time 0, id 0, bytes 1
  bad.replace(events_at + 4 * 150000, 4, std::string("\x20\x00\x00\x01\x80\x80\x80\x80\x10", 9));
  const auto r = decode_trace(bad, "large");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().expected, "event 150000 stream (at most 4294967295)");
  EXPECT_EQ(r.error().offset, events_at + 4 * 150000 + 4);
}

TEST(TraceFormatTest, TextErrorsNameTheLine) {
  const std::string text =
      "# phasealloc-trace v1\n"
      "source \"x\"\n"
      "stream_count 1\n"
      "\n"
      "# a comment\n"
      "0 alloc 0 512 0 0 0 -\n"
      "5 allocate 1 512 0 0 0 -\n";
  const auto r = parse_trace_text(text, "bad.txt");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().line, 7U);
  EXPECT_NE(r.error().message().find("bad.txt:7: expected an op in column 2"), std::string::npos)
      << r.error().message();
  EXPECT_NE(r.error().message().find("'allocate'"), std::string::npos);
}

TEST(TraceFormatTest, TextRejectsMissingHeaderBadColumnsAndLateHeaders) {
  EXPECT_EQ(parse_trace_text("0 alloc 0 1 0 0 0\n", "h").error().line, 1U);
  EXPECT_FALSE(parse_trace_text("", "empty").has_value());
  EXPECT_NE(parse_trace_text("# phasealloc-trace v9\n", "v").error().message().find("version 9"), std::string::npos);
  const auto columns = parse_trace_text("# phasealloc-trace v1\n0 alloc 0 1\n", "c");
  ASSERT_FALSE(columns.has_value());
  EXPECT_EQ(columns.error().line, 2U);
  const auto late = parse_trace_text("# phasealloc-trace v1\n0 empty_cache 0 0 0 0 0\nsource \"x\"\n", "l");
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().line, 3U);
  const auto index = parse_trace_text("# phasealloc-trace v1\nstring 1 \"skipped zero\"\n", "s");
  ASSERT_FALSE(index.has_value());
  EXPECT_NE(index.error().message().find("string index 0"), std::string::npos);
  const auto quote = parse_trace_text("# phasealloc-trace v1\nsource \"open\n", "q");
  ASSERT_FALSE(quote.has_value());
  EXPECT_NE(quote.error().message().find("closing"), std::string::npos);
}

TEST(TraceFormatTest, TextAcceptsSevenColumnsAndComments) {
  const auto r = parse_trace_text(
      "\n# phasealloc-trace v1\r\nstream_count 2\r\n10 alloc 3 100 1 0 0 # first\n20 free 3 100 1 0 0\n", "ok");
  ASSERT_TRUE(r.has_value()) << r.error().message();
  ASSERT_EQ(r.value().events.size(), 2U);
  EXPECT_EQ(r.value().events[0], make_event(trace_event_op::alloc, 10, 3, 100, 1));
  EXPECT_TRUE(validate(r.value()).has_value());
}

// --- validation -------------------------------------------------------------------------------------

trace two_allocs() {
  trace t;
  t.strings = {"training"};
  t.events = {make_event(trace_event_op::alloc, 0, 0, 100), make_event(trace_event_op::alloc, 5, 1, 200)};
  return t;
}

std::string problem_of(const trace& t, std::size_t expected_index) {
  const auto v = validate(t);
  if (v.has_value()) return "valid";
  EXPECT_EQ(v.error().event_index, expected_index) << v.error().message();
  return v.error().message();
}

TEST(TraceValidateTest, RejectsFreeOfUnknownId) {
  trace t = two_allocs();
  t.events.push_back(make_event(trace_event_op::free, 6, 9, 100));
  EXPECT_EQ(problem_of(t, 2), "event 2 (free): allocation id 9 is not live (never allocated)");
}

TEST(TraceValidateTest, RejectsDoubleFreeNamingTheFirst) {
  trace t = two_allocs();
  t.events.push_back(make_event(trace_event_op::free, 6, 0, 100));
  t.events.push_back(make_event(trace_event_op::free, 7, 0, 100));
  EXPECT_EQ(problem_of(t, 3), "event 3 (free): allocation id 0 is not live (freed at event 2)");
}

TEST(TraceValidateTest, RejectsIdAllocatedTwice) {
  trace t = two_allocs();
  t.events.push_back(make_event(trace_event_op::free, 6, 0, 100));
  t.events.push_back(make_event(trace_event_op::alloc, 7, 0, 100));
  EXPECT_EQ(problem_of(t, 3), "event 3 (alloc): allocation id 0 was already allocated at event 0");
}

TEST(TraceValidateTest, RejectsSizeMismatchAndBackwardsTime) {
  trace t = two_allocs();
  t.events.push_back(make_event(trace_event_op::free, 6, 1, 100));
  EXPECT_NE(problem_of(t, 2).find("allocated with 200 bytes at event 1 but freed with 100 bytes"), std::string::npos);
  trace u = two_allocs();
  u.events.push_back(make_event(trace_event_op::empty_cache, 4));
  EXPECT_EQ(problem_of(u, 2), "event 2 (empty_cache): time goes backwards (4 ns after 5 ns)");
}

TEST(TraceValidateTest, RejectsBadIndicesStreamsAndFlags) {
  trace t = two_allocs();
  t.events.push_back(make_event(trace_event_op::phase, 6, 0, 0, 0, 0, 1));
  EXPECT_NE(problem_of(t, 2).find("phase name index 1 is out of range (the string table has 1)"), std::string::npos);
  trace s = two_allocs();
  s.events.push_back(make_event(trace_event_op::alloc, 6, 2, 1, 1));
  EXPECT_NE(problem_of(s, 2).find("stream ordinal 1 is not below the stream count 1"), std::string::npos);
  trace f = two_allocs();
  f.events.push_back(make_event(trace_event_op::alloc, 6, 2, 1, 0, 0, 0, trace_flag::seeded));
  EXPECT_NE(problem_of(f, 2).find("seeded event follows an unseeded one"), std::string::npos);
  trace g = two_allocs();
  g.events[0].flags = 0x80;
  EXPECT_NE(problem_of(g, 0).find("unknown flag bits"), std::string::npos);
  trace h = two_allocs();
  h.events.insert(h.events.begin(), make_event(trace_event_op::free, 0, 0, 0, 0, 0, 0, trace_flag::seeded));
  EXPECT_NE(problem_of(h, 0).find("only alloc, segment_alloc and seed_block may be seeded"), std::string::npos);
}

TEST(TraceValidateTest, ChecksSegmentIdsAndRecordStream) {
  trace t;
  t.events = {make_event(trace_event_op::segment_alloc, 0, 0, 2 << 20),
              make_event(trace_event_op::segment_free, 1, 0, 2 << 20),
              make_event(trace_event_op::segment_free, 2, 0, 2 << 20)};
  EXPECT_EQ(problem_of(t, 2), "event 2 (segment_free): segment id 0 is not live (freed at event 1)");
  trace r;
  r.events = {make_event(trace_event_op::record_stream, 0, 4)};
  EXPECT_EQ(problem_of(r, 0), "event 0 (record_stream): allocation id 4 is not live (never allocated)");
}

TEST(TraceValidateTest, RejectsReuseAfterFreeNamingTheFirstAllocation) {
  trace t = two_allocs();
  t.events.push_back(make_event(trace_event_op::free, 6, 1, 200));
  t.events.push_back(make_event(trace_event_op::alloc, 7, 9, 1));
  t.events.push_back(make_event(trace_event_op::alloc, 8, 1, 300));  // below the newest id, freed
  EXPECT_EQ(problem_of(t, 4), "event 4 (alloc): allocation id 1 was already allocated at event 1");
  trace s;
  s.events = {make_event(trace_event_op::segment_alloc, 0, 3, 2 << 20),
              make_event(trace_event_op::segment_free, 1, 3, 2 << 20),
              make_event(trace_event_op::segment_alloc, 2, 3, 2 << 20)};
  EXPECT_EQ(problem_of(s, 2), "event 2 (segment_alloc): segment id 3 was already allocated at event 0");
}

TEST(TraceValidateTest, NamesTheFreeOfAFreedIdUsedAgain) {
  trace t = two_allocs();
  t.events.push_back(make_event(trace_event_op::alloc, 6, 2, 8));
  t.events.push_back(make_event(trace_event_op::free, 7, 2, 8));
  t.events.push_back(make_event(trace_event_op::record_stream, 8, 2));
  EXPECT_EQ(problem_of(t, 4), "event 4 (record_stream): allocation id 2 is not live (freed at event 3)");
  trace m = two_allocs();
  m.events.push_back(make_event(trace_event_op::free, 6, 1, 100));
  EXPECT_EQ(problem_of(m, 2),
            "event 2 (free): allocation id 1 was allocated with 200 bytes at event 1 but freed with 100 bytes");
}

TEST(TraceValidateTest, WideAndShuffledIds) {
  trace t;
  t.events = {make_event(trace_event_op::alloc, 0, UINT64_MAX, 1), make_event(trace_event_op::alloc, 1, 0, 2),
              make_event(trace_event_op::alloc, 2, 1ULL << 63, 3), make_event(trace_event_op::free, 3, UINT64_MAX, 1),
              make_event(trace_event_op::free, 4, 1ULL << 63, 3), make_event(trace_event_op::alloc, 5, 7, 4),
              make_event(trace_event_op::alloc, 6, 1ULL << 63, 3)};
  EXPECT_EQ(problem_of(t, 6), "event 6 (alloc): allocation id 9223372036854775808 was already allocated at event 2");
  t.events.back() = make_event(trace_event_op::alloc, 6, UINT64_MAX, 3);
  EXPECT_EQ(problem_of(t, 6), "event 6 (alloc): allocation id 18446744073709551615 was already allocated at event 0");
  t.events.back() = make_event(trace_event_op::free, 6, 1ULL << 63, 3);
  EXPECT_EQ(problem_of(t, 6), "event 6 (free): allocation id 9223372036854775808 is not live (freed at event 4)");
  t.events.back() = make_event(trace_event_op::free, 6, 6, 3);
  EXPECT_EQ(problem_of(t, 6), "event 6 (free): allocation id 6 is not live (never allocated)");
}

// The id checks as they were first written (every id ever seen in a map, with its birth and
// death): validate() must give the same first error on random traces with one bad event added.
std::string reference_id_problem(const trace& t) {
  struct life {
    std::uint64_t bytes;
    std::size_t born_at;
    std::size_t died_at;
    bool live;
  };
  std::unordered_map<std::uint64_t, life> books[2];
  const char* nouns[2] = {"allocation", "segment"};
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    const bool segment = e.op == trace_event_op::segment_alloc || e.op == trace_event_op::segment_free;
    auto& ids = books[segment ? 1 : 0];
    const char* noun = nouns[segment ? 1 : 0];
    const auto at = [&](const std::string& problem) {
      return fmt::format("event {} ({}): {}", i, to_string(e.op), problem);
    };
    const auto check_live = [&]() -> std::string {
      const auto it = ids.find(e.alloc_id);
      if (it == ids.end()) return fmt::format("{} id {} is not live (never allocated)", noun, e.alloc_id);
      if (!it->second.live) return fmt::format("{} id {} is not live (freed at event {})", noun, e.alloc_id, it->second.died_at);
      return {};
    };
    if (e.op == trace_event_op::alloc || e.op == trace_event_op::segment_alloc) {
      const auto [it, inserted] = ids.try_emplace(e.alloc_id, life{e.bytes, i, 0, true});
      if (!inserted) return at(fmt::format("{} id {} was already allocated at event {}", noun, e.alloc_id, it->second.born_at));
    } else if (e.op == trace_event_op::free || e.op == trace_event_op::segment_free) {
      if (auto problem = check_live(); !problem.empty()) return at(problem);
      life& l = ids.find(e.alloc_id)->second;
      if (l.bytes != e.bytes) {
        return at(fmt::format("{} id {} was allocated with {} bytes at event {} but freed with {} bytes", noun,
                              e.alloc_id, l.bytes, l.born_at, e.bytes));
      }
      l.live = false;
      l.died_at = i;
    } else if (e.op == trace_event_op::record_stream) {
      if (auto problem = check_live(); !problem.empty()) return at(problem);
    }
  }
  return "valid";
}

TEST(TraceValidateTest, IdErrorsMatchTheReferenceOnRandomTraces) {
  std::mt19937_64 rng(11);
  std::set<std::string> kinds;  // the wording of each error met, without its numbers
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    trace t = random_valid_trace(seed, 300);
    if (seed % 2 == 1) {  // shuffled wide ids: no runs, the hash set path
      for (trace_event& e : t.events) e.alloc_id = (e.alloc_id * 0x2545F4914F6CDD1DULL) ^ 0xA5A5'0000'FFFF'1234ULL;
    }
    std::size_t first_unseeded = 0;
    while (first_unseeded < t.events.size() && (t.events[first_unseeded].flags & trace_flag::seeded) != 0) {
      ++first_unseeded;
    }
    const std::size_t at = first_unseeded + rng() % (t.events.size() - first_unseeded + 1);
    const std::uint64_t now = at == 0 ? 0 : t.events[at - 1].time_ns;
    // An id of the trace (or a neighbour) and a size of the trace (or not).
    const trace_event& other = t.events[rng() % t.events.size()];
    const std::uint64_t id = rng() % 4 == 0 ? other.alloc_id + 1 : other.alloc_id;
    const std::uint64_t bytes = rng() % 3 == 0 ? other.bytes + 1 : other.bytes;
    const trace_event_op ops[] = {trace_event_op::alloc, trace_event_op::free, trace_event_op::record_stream,
                                  trace_event_op::segment_alloc, trace_event_op::segment_free};
    t.events.insert(t.events.begin() + static_cast<std::ptrdiff_t>(at),
                    make_event(ops[rng() % 5], now, id, bytes % (1ULL << 40)));
    const auto v = validate(t);
    const std::string got = v.has_value() ? "valid" : v.error().message();
    ASSERT_EQ(got, reference_id_problem(t)) << "seed " << seed;
    std::string kind;
    for (const char c : got) {
      if (c < '0' || c > '9') kind += c;
    }
    kinds.insert(kind);
  }
  // Every id error, for both namespaces, and valid traces were met.
  EXPECT_GE(kinds.size(), 10U);
}

TEST(TraceValidateTest, SeedBlocksNameTheirAllocation) {
  constexpr std::uint8_t seeded = trace_flag::seeded;
  constexpr std::uint8_t held = trace_flag::seeded | trace_flag::allocated;
  trace t;
  t.version = trace_format_version_layout;
  t.events = {make_event(trace_event_op::alloc, 0, 0, 4096, 0, 0, 0, seeded),
              make_event(trace_event_op::segment_alloc, 0, 0, 2 << 20, 0, 0, 0, seeded),
              make_event(trace_event_op::seed_block, 0, 0, 4096, 0, 0, 0, held),
              make_event(trace_event_op::seed_block, 0, 0, 4096, 0, 0, 0, held)};
  EXPECT_EQ(problem_of(t, 3), "event 3 (seed_block): allocation id 0 is already placed by the seed_block at event 2");
  t.events[3].alloc_id = 7;
  EXPECT_EQ(problem_of(t, 3), "event 3 (seed_block): allocation id 7 is not live (never allocated)");
  t.events.pop_back();
  t.events[2].bytes = 100;
  EXPECT_EQ(problem_of(t, 2), "event 2 (seed_block): a block of 100 bytes holds allocation id 0 of 4096 bytes");
}

TEST(TraceValidateTest, RejectsUnknownVersion) {
  trace t;
  t.version = 7;
  EXPECT_NE(problem_of(t, 0).find("trace version 7"), std::string::npos);
}

// --- files ----------------------------------------------------------------------------------------

class TraceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("phasealloc_trace_file_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(TraceFileTest, SaveAndLoadSniffTheFormat) {
  const trace t = random_valid_trace(7, 300);
  for (const auto format : {trace_file_format::binary, trace_file_format::text}) {
    const auto path = dir_ / (format == trace_file_format::binary ? "t.patrace" : "t.txt");
    ASSERT_TRUE(save_trace(path, t, format).has_value());
    EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
    const auto back = load_trace(path);
    ASSERT_TRUE(back.has_value()) << back.error().message();
    EXPECT_EQ(back.value(), t);
    EXPECT_EQ(format_for_path(path), format);
  }
}

TEST_F(TraceFileTest, LoadNamesMissingAndForeignFiles) {
  const auto missing = load_trace(dir_ / "nope.patrace");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("nope.patrace"), std::string::npos);
  const auto foreign_path = dir_ / "foreign.bin";
  std::ofstream(foreign_path) << "\x80\x04garbage";
  const auto foreign = load_trace(foreign_path);
  ASSERT_FALSE(foreign.has_value());
  EXPECT_NE(foreign.error().message().find("expected a phasealloc trace"), std::string::npos);
}

TEST_F(TraceFileTest, SaveIntoMissingFolderFails) {
  const auto r = save_trace(dir_ / "no" / "such" / "dir" / "t.patrace", sample_trace());
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("writable"), std::string::npos);
}

// --- summary --------------------------------------------------------------------------------------

TEST(TraceSummaryTest, CountsPeaksAndReserved) {
  const trace_summary s = summarize(sample_trace());
  EXPECT_EQ(s.allocs, 2U);
  EXPECT_EQ(s.seeded_allocs, 1U);
  EXPECT_EQ(s.frees, 2U);
  EXPECT_EQ(s.phase_changes, 2U);
  EXPECT_EQ(s.ooms, 1U);
  EXPECT_EQ(s.seeded_live_bytes, 4096U);
  EXPECT_EQ(s.peak_live_bytes, 4096U + 512U);
  EXPECT_EQ(s.final_live_bytes, 0U);
  EXPECT_EQ(s.seeded_segments, 1U);
  EXPECT_EQ(s.segment_allocs, 0U);
  EXPECT_EQ(s.initial_reserved_bytes, 20U << 20);
  EXPECT_EQ(s.peak_reserved_bytes, 22U << 20);
  EXPECT_EQ(s.final_reserved_bytes, 0U);
  EXPECT_EQ(s.duration_ns, 40U);
}

TEST(TraceSummaryTest, BestEffortOnInvalidTraces) {
  trace t;
  t.events = {make_event(trace_event_op::alloc, 0, 3, 100), make_event(trace_event_op::alloc, 1, 3, 50),  // twice
              make_event(trace_event_op::free, 2, 9, 70),                                                 // unknown
              make_event(trace_event_op::alloc, 3, 1ULL << 40, 10), make_event(trace_event_op::free, 4, 3, 50),
              make_event(trace_event_op::free, 5, 3, 100)};                                              // again
  const trace_summary s = summarize(t);
  EXPECT_EQ(s.allocs, 3U);
  EXPECT_EQ(s.frees, 3U);
  EXPECT_EQ(s.peak_live_bytes, 110U);
  EXPECT_EQ(s.final_live_bytes, 10U);
}

TEST(TraceSummaryTest, SizesNearTwoToTheSixtyFourDoNotWrap) {
  // What --no-validate lets through: two allocations whose sum passes 2^64. The levels are exact,
  // the reported bytes stop at 2^64 - 1, and a free brings the level back down exactly.
  const std::uint64_t huge = (1ULL << 63) + 512;
  trace t;
  t.events = {make_event(trace_event_op::alloc, 0, 1, huge), make_event(trace_event_op::alloc, 1, 2, huge),
              make_event(trace_event_op::alloc, 2, 3, 100), make_event(trace_event_op::free, 3, 1, huge),
              make_event(trace_event_op::segment_alloc, 4, 7, huge), make_event(trace_event_op::segment_alloc, 5, 8, huge),
              make_event(trace_event_op::segment_free, 6, 8, huge)};
  const trace_summary s = summarize(t);
  EXPECT_EQ(s.peak_live_bytes, UINT64_MAX);
  EXPECT_EQ(s.final_live_bytes, huge + 100);
  EXPECT_EQ(s.peak_reserved_bytes, UINT64_MAX);
  EXPECT_EQ(s.final_reserved_bytes, huge);
}

void expect_same_summary(const trace_summary& a, const trace_summary& b) {
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.allocs, b.allocs);
  EXPECT_EQ(a.seeded_allocs, b.seeded_allocs);
  EXPECT_EQ(a.frees, b.frees);
  EXPECT_EQ(a.record_streams, b.record_streams);
  EXPECT_EQ(a.phase_changes, b.phase_changes);
  EXPECT_EQ(a.empty_caches, b.empty_caches);
  EXPECT_EQ(a.ooms, b.ooms);
  EXPECT_EQ(a.seeded_live_bytes, b.seeded_live_bytes);
  EXPECT_EQ(a.peak_live_bytes, b.peak_live_bytes);
  EXPECT_EQ(a.final_live_bytes, b.final_live_bytes);
  EXPECT_EQ(a.segment_allocs, b.segment_allocs);
  EXPECT_EQ(a.seeded_segments, b.seeded_segments);
  EXPECT_EQ(a.segment_frees, b.segment_frees);
  EXPECT_EQ(a.segment_maps, b.segment_maps);
  EXPECT_EQ(a.segment_unmaps, b.segment_unmaps);
  EXPECT_EQ(a.initial_reserved_bytes, b.initial_reserved_bytes);
  EXPECT_EQ(a.peak_reserved_bytes, b.peak_reserved_bytes);
  EXPECT_EQ(a.final_reserved_bytes, b.final_reserved_bytes);
  EXPECT_EQ(a.duration_ns, b.duration_ns);
}

TEST(TraceSummaryTest, ValidateAndSummarizeIsValidateThenSummarize) {
  std::vector<trace> traces = {sample_trace()};
  for (std::uint64_t seed = 0; seed < 40; ++seed) traces.push_back(random_valid_trace(seed, 500));
  for (const trace& t : traces) {
    const auto both = validate_and_summarize(t);
    ASSERT_TRUE(both.has_value()) << both.error().message();
    expect_same_summary(both.value(), summarize(t));
  }
  trace bad = two_allocs();
  bad.events.push_back(make_event(trace_event_op::free, 6, 1, 100));
  const auto both = validate_and_summarize(bad);
  ASSERT_FALSE(both.has_value());
  EXPECT_EQ(both.error().message(), validate(bad).error().message());
  trace old;
  old.version = 9;
  EXPECT_EQ(validate_and_summarize(old).error().message(), validate(old).error().message());
}

TEST(TraceFormatTest, OpNamesRoundTrip) {
  for (std::size_t i = 0; i < trace_event_op_count; ++i) {
    const auto op = static_cast<trace_event_op>(i);
    EXPECT_EQ(parse_trace_event_op(to_string(op)), op);
  }
  EXPECT_FALSE(parse_trace_event_op("malloc").has_value());
}

}  // namespace
}  // namespace phasealloc
