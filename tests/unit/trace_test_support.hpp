// Builders shared by the trace and importer tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "phasealloc/trace/trace_format.hpp"
#include "phasealloc/trace/trace_text.hpp"

namespace phasealloc::testing {

/// A text trace read from `path` (a test fails, naming the error, when it does not parse; the trace
/// is then empty).
inline trace load_text_trace(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto t = parse_trace_text(text.str(), path.string());
  EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().message());
  return t.has_value() ? std::move(t).value() : trace{};
}

inline trace_event make_event(trace_event_op op, std::uint64_t time_ns, std::uint64_t id = 0, std::uint64_t bytes = 0,
                              std::uint32_t stream = 0, std::uint32_t tag = 0, std::uint32_t name = 0,
                              std::uint8_t flags = 0) {
  trace_event e;
  e.op = op;
  e.time_ns = time_ns;
  e.alloc_id = id;
  e.bytes = bytes;
  e.stream = stream;
  e.tag = tag;
  e.name = name;
  e.flags = flags;
  return e;
}

/// A trace that validates: allocations, frees of live ids, phases, streams, segments, seeds.
inline trace random_valid_trace(std::uint64_t seed, std::size_t events) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
  trace t;
  t.meta.source = "random " + std::to_string(seed);
  t.meta.stream_count = 1 + static_cast<std::uint32_t>(pick(4));
  t.strings = {"", "generation", "training", "optimizer"};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> live;  // id, bytes
  std::vector<std::pair<std::uint64_t, std::uint64_t>> segments;
  std::uint64_t next_id = 0;
  std::uint64_t next_segment = 0;
  std::uint64_t now = 0;
  const std::size_t seeds = pick(4);
  for (std::size_t i = 0; i < seeds; ++i) {
    const std::uint64_t bytes = 1 + pick(1 << 20);
    t.events.push_back(make_event(trace_event_op::alloc, 0, next_id, bytes, 0, 0, 0, trace_flag::seeded));
    live.emplace_back(next_id++, bytes);
  }
  for (std::size_t i = 0; i < events; ++i) {
    now += pick(3) == 0 ? 0 : pick(100000);
    const auto stream = static_cast<std::uint32_t>(pick(t.meta.stream_count));
    switch (pick(10)) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const std::uint64_t bytes = pick(4) == 0 ? pick(1ULL << 34) : 1 + pick(4096);
        t.events.push_back(make_event(trace_event_op::alloc, now, next_id, bytes, stream,
                                      static_cast<std::uint32_t>(pick(3))));
        live.emplace_back(next_id++, bytes);
        break;
      }
      case 4:
      case 5:
      case 6:
        if (!live.empty()) {
          const std::size_t k = pick(live.size());
          t.events.push_back(make_event(trace_event_op::free, now, live[k].first, live[k].second, stream));
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
        break;
      case 7:
        t.events.push_back(make_event(trace_event_op::phase, now, 0, 0, 0, 0, static_cast<std::uint32_t>(pick(4))));
        break;
      case 8:
        if (!live.empty()) {
          t.events.push_back(make_event(trace_event_op::record_stream, now, live[pick(live.size())].first, 0, stream));
        }
        break;
      default:
        if (!segments.empty() && pick(2) == 0) {
          const std::size_t k = pick(segments.size());
          t.events.push_back(make_event(trace_event_op::segment_free, now, segments[k].first, segments[k].second));
          segments.erase(segments.begin() + static_cast<std::ptrdiff_t>(k));
        } else {
          const std::uint64_t bytes = (1 + pick(10)) << 21;
          t.events.push_back(make_event(trace_event_op::segment_alloc, now, next_segment, bytes));
          segments.emplace_back(next_segment++, bytes);
        }
        break;
    }
  }
  return t;
}

}  // namespace phasealloc::testing
