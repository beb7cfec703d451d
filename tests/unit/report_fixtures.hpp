// Synthetic replay results for the report tests: an RLHF-shaped allocated curve over four phases
// and a few policies whose reserved curves differ the way real ones do (no replay needed).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "phasealloc/report/report.hpp"

namespace phasealloc::report_testing {

inline constexpr const char* phase_cycle[] = {"generation", "inference", "training", "optimizer"};

/// Allocated bytes at fraction `t` (0..1) into a phase of the given kind.
inline double synthetic_allocated(std::size_t phase_kind, double t) {
  const double weights = 14.0 * gib;
  switch (phase_kind) {
    case 0: return weights + 22.0 * gib * t;                                   // KV cache grows
    case 1: return weights + 6.0 * gib * std::sin(3.14159 * t);                // scoring activations
    case 2: return weights + 4.0 * gib + 26.0 * gib * std::sin(3.14159 * t);   // forward then backward
    default: return weights + 4.0 * gib + 8.0 * gib * (t < 0.8 ? 1.0 : 0.2);  // optimizer states
  }
}

struct synthetic_options {
  std::size_t events = 120'000;
  std::size_t timeline_points = 5'000;
  std::size_t iterations = 3;
  std::uint64_t duration_ns = 40'000'000'000;
  std::vector<std::string> policies = {"pytorch", "phasealloc:release=adaptive", "pytorch:expandable_segments:True"};
  bool add_oom_policy = true;  ///< Adds `phasealloc:release=never,tag=<tight & "cap">`, which runs out.
};

/// Reserved by position (mod 3): ratchets (PyTorch), releases at phase ends, page-granular; the
/// added OOM policy ratchets hard and hits the capacity.
inline report_input make_synthetic_report(const synthetic_options& o = {}) {
  report_input in;
  in.trace_name = "rlhf-ppo-synthetic <7b> & co.patrace";
  in.capacity_bytes = 80 * gib;
  in.generated_by = "phasealloc report rlhf-ppo-synthetic.patrace --policy pytorch --policy 'phasealloc:release=adaptive'";
  std::vector<std::string> policies = o.policies;
  if (o.add_oom_policy) policies.push_back("phasealloc:release=never,tag=<tight & \"cap\">");

  const std::size_t phases = o.iterations * 4;
  const std::size_t per_phase = std::max<std::size_t>(1, o.events / std::max<std::size_t>(1, phases));
  const std::size_t stride = o.timeline_points == 0 ? 0 : std::max<std::size_t>(1, o.events / o.timeline_points);
  double floor = 0;

  for (std::size_t pi = 0; pi < policies.size(); ++pi) {
    const bool oom_policy = o.add_oom_policy && pi + 1 == policies.size();
    replay_result r;
    r.policy = policies[pi];
    r.device = pi % 3 == 2 ? "model (virtual memory)" : "model (whole segments)";
    r.capacity_bytes = in.capacity_bytes;
    r.events = o.events;
    std::map<std::string, phase_stats> by_name;
    std::vector<std::string> order;
    double reserved = 0;
    double phase_peak = 0;
    timeline_point window;
    for (std::size_t i = 0; i < o.events; ++i) {
      const std::size_t phase_index = std::min(i / per_phase, phases - 1);
      const std::size_t kind = phase_index % 4;
      const double t = static_cast<double>(i - phase_index * per_phase) / static_cast<double>(per_phase);
      const std::uint64_t time_ns = o.duration_ns * i / std::max<std::size_t>(1, o.events);
      const std::string name = phase_cycle[kind];
      if (i == phase_index * per_phase) {
        if (r.bands.empty() || r.bands.back().name != name) {
          if (!r.bands.empty()) {
            r.bands.back().end_event = i;
            r.bands.back().end_ns = time_ns;
          }
          r.bands.push_back({name, i, i, time_ns, time_ns});
        }
        if (!oom_policy && pi % 3 == 1) reserved = 0, phase_peak = 0;  // release at the transition
        if (!by_name.count(name)) order.push_back(name);
        by_name[name].name = name;
        by_name[name].intervals += 1;
      }
      double allocated = synthetic_allocated(kind, t);
      floor = std::max(floor, allocated * 0.985);
      const double slack = 1.0 + 0.01 * static_cast<double>(pi / 3);  // policies past three differ a little
      switch (oom_policy ? 3 : pi % 3) {
        case 0: reserved = std::max(reserved, allocated * 1.12 * slack); break;
        case 1: phase_peak = std::max(phase_peak, allocated * 1.03 * slack); reserved = phase_peak; break;
        case 2: reserved = std::ceil(allocated * 1.01 * slack / (2.0 * mib)) * 2.0 * mib; break;
        default: reserved = std::max(reserved, allocated * 1.9); break;
      }
      if (reserved > static_cast<double>(in.capacity_bytes)) {
        reserved = static_cast<double>(in.capacity_bytes);
        allocated = std::min(allocated, reserved * 0.8);
        r.ooms += 1;
        by_name[name].num_ooms += 1;
      }
      phase_stats& ps = by_name[name];
      ps.num_allocs += 1;
      ps.num_frees += 1;
      const auto a = static_cast<std::int64_t>(allocated);
      const auto res = static_cast<std::int64_t>(reserved);
      ps.peak_allocated_bytes = std::max(ps.peak_allocated_bytes, a);
      if (res > ps.peak_reserved_bytes) {
        ps.peak_reserved_bytes = res;
        ps.reserved_unallocated_at_peak_bytes = res - a;
      }
      r.peak_allocated_bytes = std::max<std::size_t>(r.peak_allocated_bytes, static_cast<std::size_t>(a));
      r.peak_reserved_bytes = std::max<std::size_t>(r.peak_reserved_bytes, static_cast<std::size_t>(res));
      window.allocated_bytes = std::max<std::size_t>(window.allocated_bytes, static_cast<std::size_t>(a));
      window.reserved_bytes = std::max<std::size_t>(window.reserved_bytes, static_cast<std::size_t>(res));
      if (stride != 0 && ((i + 1) % stride == 0 || i + 1 == o.events)) {
        window.event = i;
        window.time_ns = time_ns;
        r.timeline.push_back(window);
        window = timeline_point{};
      }
    }
    if (!r.bands.empty()) {
      r.bands.back().end_event = o.events;
      r.bands.back().end_ns = o.duration_ns;
    }
    for (const std::string& name : order) {
      phase_stats ps = by_name[name];
      ps.num_device_alloc = static_cast<std::int64_t>(pi % 3 == 1 ? 40 : 12);
      ps.num_device_free = pi % 3 == 1 ? 38 : 0;
      ps.num_device_map = pi % 3 == 2 ? 900 : 0;
      ps.num_device_unmap = pi % 3 == 2 ? 850 : 0;
      ps.released_bytes = pi % 3 == 1 ? static_cast<std::int64_t>(9 * gib) : 0;
      r.phases.push_back(ps);
      r.device_allocs += ps.num_device_alloc;
      r.device_frees += ps.num_device_free;
      r.device_maps += ps.num_device_map;
      r.device_unmaps += ps.num_device_unmap;
    }
    r.peak_requested_bytes = r.peak_allocated_bytes;
    r.modeled_device_time_ns = static_cast<std::uint64_t>(r.device_calls()) * 30'000;
    in.results.push_back(std::move(r));
  }
  in.floor_bytes = static_cast<std::uint64_t>(floor);
  return in;
}

}  // namespace phasealloc::report_testing
