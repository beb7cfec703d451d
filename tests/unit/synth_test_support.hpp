// Helpers the synth tests share: a job from its conf string, its trace, and peaks read off it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "phasealloc/synth/synth.hpp"

namespace phasealloc::synth_test {

inline rlhf_job job_of(std::string_view conf) {
  auto job = parse_job(conf);
  EXPECT_TRUE(job.has_value()) << job.error();
  return job.value();
}

inline trace synth(const rlhf_job& job) {
  auto t = synthesize(job);
  EXPECT_TRUE(t.has_value()) << t.error();
  return t.value();
}

inline trace synth(std::string_view conf) { return synth(job_of(conf)); }

inline std::uint32_t tag_of(alloc_tag tag) { return static_cast<std::uint32_t>(tag); }

// Peak live bytes while `phase_name` runs ("" = setup, before the first phase).
inline std::uint64_t phase_peak(const trace& t, std::string_view phase_name) {
  std::map<std::uint64_t, std::uint64_t> live;
  std::uint64_t now = 0, peak = 0;
  std::string phase;
  for (const trace_event& e : t.events) {
    if (e.op == trace_event_op::phase) phase = t.strings[e.name];
    if (e.op == trace_event_op::alloc) {
      live[e.alloc_id] = e.bytes;
      now += e.bytes;
    }
    if (e.op == trace_event_op::free) now -= live[e.alloc_id];
    if (phase == phase_name) peak = std::max(peak, now);
  }
  return peak;
}

}  // namespace phasealloc::synth_test
