#include "phasealloc/replay/replay.hpp"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include <fmt/format.h>

#include "phasealloc/check.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"
#include "pressure_offloads.hpp"
#include "replay_detail.hpp"

namespace phasealloc {
namespace {

using replay_detail::address_book;
using replay_detail::recorded_layout;

/// Keeps the sizes of segment allocations as the engine makes them, and passes every event on to
/// the caller's observer.
struct segment_sink final : trace_sink {
  std::vector<std::size_t>* sizes = nullptr;  ///< nullptr: not kept
  std::vector<std::pair<trace_op, std::size_t>>* events = nullptr;
  trace_sink* observer = nullptr;
  void on_event(const trace_record& r) noexcept override {
    if (sizes != nullptr && r.op == trace_op::segment_alloc) sizes->push_back(r.block_bytes);
    if (events != nullptr && (r.op == trace_op::segment_alloc || r.op == trace_op::segment_free ||
                              r.op == trace_op::segment_map || r.op == trace_op::segment_unmap)) {
      events->emplace_back(r.op, r.block_bytes);
    }
    if (observer != nullptr) observer->on_event(r);
  }
};

}  // namespace

model_device_cost default_replay_cost() {
  model_device_cost c;
  c.reserve_ns = 30'000;       // cudaMalloc / cuMemAddressReserve
  c.release_ns = 30'000;       // cudaFree (synchronises) / cuMemAddressFree
  c.map_ns = 5'000;            // cuMemMap + cuMemSetAccess per call
  c.map_granule_ns = 8'000;    // cuMemCreate per 2 MiB page
  c.unmap_ns = 5'000;
  c.unmap_granule_ns = 4'000;  // cuMemUnmap + cuMemRelease per page
  c.event_ns = 1'000;
  c.sync_ns = 10'000;
  return c;
}

result<replay_result, std::string> replay(const trace& t, std::string_view policy_spec, const replay_options& options) {
  auto made = make_policy(policy_spec);
  if (!made) return made.error();
  std::unique_ptr<policy> pol = std::move(made).value();
  if (options.capacity_bytes == 0) return std::string("the model device's capacity is 0 bytes");
  // A fraction that leaves nothing of this device is an error here, not a limit of nothing.
  if (auto limit = memory_limit_bytes(pol->memory_fraction(), options.capacity_bytes); !limit) {
    return fmt::format("policy '{}': {}", pol->spec(), limit.error());
  }

  const bool virtual_memory = replay_detail::wants_virtual_memory(*pol, options);
  model_device dev(replay_detail::replay_device_config(options, virtual_memory));

  replay_result out;
  out.policy = pol->spec();
  out.device = virtual_memory ? "model (virtual memory)" : "model (whole segments)";
  out.models_recording = pol->models_recorded_allocator();
  out.capacity_bytes = options.capacity_bytes;
  out.events = t.events.size();

  segment_sink segments;
  segments.sizes = options.record_segments ? &out.segment_alloc_bytes : nullptr;
  segments.events = options.record_segments ? &out.segment_events : nullptr;
  segments.observer = options.observer;
  address_book addresses(t);
  std::unordered_map<std::uint64_t, bool> placed_by_layout;  // seeded allocation ids the layout placed
  const bool use_layout = options.use_recorded_layout.value_or(out.models_recording);
  const auto started = std::chrono::steady_clock::now();
  {
    engine eng(dev, *pol, engine_options{.strict = false, .check_invariants = options.check_invariants});
    if (use_layout) {
      std::vector<std::uint64_t> ids;
      const std::vector<seed_segment> layout = recorded_layout(t, ids);
      if (!layout.empty()) {
        auto seeded = eng.seed(layout);
        if (!seeded) return fmt::format("the trace's recorded layout: {}", seeded.error());
        for (std::size_t k = 0; k < ids.size(); ++k) {
          addresses.set(ids[k], seeded.value()[k]);
          placed_by_layout.emplace(ids[k], true);
        }
        out.seeded_segments = layout.size();
      }
    }
    if (options.record_segments || options.observer != nullptr) eng.set_trace_sink(&segments);

    const std::size_t n = t.events.size();
    const std::size_t stride = options.timeline_points == 0 ? 0 : std::max<std::size_t>(1, n / options.timeline_points);
    timeline_point window;
    const std::size_t progress_every = std::max<std::size_t>(n / 100, 1);
    std::string current_phase = "unphased";
    out.bands.push_back({current_phase, 0, 0, 0, 0});

    // Colocation headroom: the level between two events is the one the first left.
    const bool timed = n > 1 && t.events.back().time_ns > t.events.front().time_ns;
    residency_meter residency(current_phase, timed);
    // The modelled reserved level, read from the engine only where it can move: allocations (growth,
    // out-of-memory releases), phase changes, empty_cache and offload calls; a free or a
    // record_stream never moves it.
    std::size_t modelled_reserved = eng.levels().reserved_bytes;
    residency.level(modelled_reserved);  // a recorded layout starts above zero

    std::vector<device_address> move_call;  // the addresses of the offload or restore call being read
    std::vector<std::uint64_t> move_ids;    // its allocations' ids (offload:pressure)
    const offload_replay offload_mode = out.models_recording && options.offload == offload_replay::pressure
                                            ? offload_replay::recorded  // PyTorch's allocator: every call refused
                                            : options.offload;
    out.offload_mode = options.offload;
    replay_detail::pressure_offloads pressure;
    std::int64_t relieved_failures = 0;                      // failed tries of allocations pressure relieved
    std::unordered_map<std::string, std::int64_t> extra_failures_by_phase;  // tries beyond one per allocation
    // Makes (or, restoring, brings back) what the allocations `ids` hold now: one engine call.
    const auto move_ids_now = [&](const std::vector<std::uint64_t>& ids, bool offload) {
      std::vector<device_address> call;
      for (const std::uint64_t id : ids) {
        if (const device_address a = addresses.peek(id); a != 0) call.push_back(a);
      }
      if (call.empty()) return;
      const auto moved = offload ? eng.offload(call) : eng.restore(call);
      if (!moved && out.offload_failures++ == 0) out.first_offload_failure = moved.error().message;
      modelled_reserved = eng.levels().reserved_bytes;
      residency.level(modelled_reserved);
    };
    recorded_comparison& rec = out.recorded;
    std::size_t recorded_level = 0;
    std::size_t recorded_segments = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const trace_event& e = t.events[i];
      if (options.clock_ns != nullptr) *options.clock_ns = e.time_ns;
      residency.advance(e.time_ns);
      switch (e.op) {  // the recording's own reserved level
        case trace_event_op::segment_alloc:
          recorded_level += e.bytes;
          ++recorded_segments;
          rec.available = true;
          break;
        case trace_event_op::segment_map:
          recorded_level += e.bytes;
          rec.available = true;
          break;
        case trace_event_op::segment_free:
          recorded_level -= std::min<std::size_t>(recorded_level, e.bytes);
          recorded_segments -= recorded_segments > 0 ? 1 : 0;
          rec.available = true;
          break;
        case trace_event_op::segment_unmap:
          recorded_level -= std::min<std::size_t>(recorded_level, e.bytes);
          rec.available = true;
          break;
        default: break;
      }
      rec.recorded_peak_reserved_bytes = std::max(rec.recorded_peak_reserved_bytes, recorded_level);
      switch (e.op) {
        case trace_event_op::alloc: {
          if ((e.flags & trace_flag::seeded) != 0 && placed_by_layout.contains(e.alloc_id)) break;
          auto r = eng.allocate(e.bytes, e.stream, e.tag);
          if (!r && offload_mode == offload_replay::pressure && r.error().code == errc::out_of_memory) {
            // The pressure handler: held calls leave, oldest first, until the allocation fits.
            std::int64_t failed = 1;
            for (std::vector<std::uint64_t> ids = pressure.make_next(); !ids.empty() && !r;
                 ids = r ? std::vector<std::uint64_t>{} : pressure.make_next()) {
              move_ids_now(ids, true);
              r = eng.allocate(e.bytes, e.stream, e.tag);
              if (!r) ++failed;
            }
            // One out-of-memory per allocation that failed for good, none for one that fitted.
            const std::int64_t extra = r ? failed : failed - 1;
            extra_failures_by_phase[current_phase] += extra;
            relieved_failures += extra;
            if (r) ++out.pressure_relieved;
          }
          if (r) addresses.set(e.alloc_id, r.value());
          break;
        }
        case trace_event_op::free: {
          if (offload_mode == offload_replay::pressure) pressure.forget(e.alloc_id);
          const device_address a = addresses.take(e.alloc_id);
          if (a != 0) (void)eng.deallocate(a);
          break;
        }
        case trace_event_op::record_stream: {
          const device_address a = addresses.peek(e.alloc_id);
          if (a != 0) (void)eng.record_stream(a, e.stream);
          break;
        }
        case trace_event_op::phase: {
          const std::string& name = e.name < t.strings.size() ? t.strings[e.name] : current_phase;
          const std::string next = name.empty() ? std::string("unphased") : name;
          if (next != current_phase) {
            out.bands.back().end_event = i;
            out.bands.back().end_ns = e.time_ns;
            out.bands.push_back({next, i, 0, e.time_ns, 0});
            current_phase = next;
          }
          const std::size_t before = modelled_reserved;
          eng.set_phase(next);
          modelled_reserved = eng.levels().reserved_bytes;
          residency.transition(i, e.time_ns, next, before, modelled_reserved);
          break;
        }
        case trace_event_op::empty_cache:
          eng.empty_cache();
          break;
        case trace_event_op::offload:
        case trace_event_op::restore: {
          // The allocations one recorded call named (consecutive events, the call's ordinal as
          // bytes) make one call here: adjacent blocks share pages as they did when recorded. A
          // call's runs may come apart (the segment events between them): a run is moved on its
          // own either way.
          if (const device_address a = addresses.peek(e.alloc_id); a != 0) {
            move_call.push_back(a);
            move_ids.push_back(e.alloc_id);
          }
          const bool last = i + 1 == n || t.events[i + 1].op != e.op || t.events[i + 1].bytes != e.bytes;
          if (last && offload_mode == offload_replay::none) {
            move_call.clear();
          } else if (last && offload_mode == offload_replay::pressure) {
            move_call.clear();
            if (e.op == trace_event_op::offload) {
              pressure.hold(move_ids);
            } else if (const std::vector<std::uint64_t> back = pressure.restore(move_ids); !back.empty()) {
              move_ids_now(back, false);
            }
          } else if (last && out.models_recording) {  // PyTorch's allocator has none: its blocks stay
            if (out.offload_failures++ == 0) {
              out.first_offload_failure = "PyTorch's allocator has no same-address offload: its blocks stay on the GPU";
            }
            move_call.clear();
          } else if (last) {
            const auto moved = e.op == trace_event_op::offload ? eng.offload(move_call) : eng.restore(move_call);
            if (!moved && out.offload_failures++ == 0) out.first_offload_failure = moved.error().message;
            move_call.clear();
            modelled_reserved = eng.levels().reserved_bytes;
            residency.level(modelled_reserved);
          }
          if (last) move_ids.clear();
          break;
        }
        default:  // the recording allocator's own segment events and OOMs: not followed
          break;
      }
      // Only allocations (growth, out-of-memory releases), phase changes and empty_cache move the
      // reserved level; a free or a record_stream never does.
      if (e.op == trace_event_op::alloc || e.op == trace_event_op::empty_cache) {
        const memory_levels now = eng.levels();
        modelled_reserved = now.reserved_bytes;
        residency.level(now.reserved_bytes);
        if (now.reserved_bytes > out.peak_reserved_after_event_bytes) {  // only an allocation raises it
          out.peak_reserved_after_event_bytes = now.reserved_bytes;
          out.peak_reserved_event = i;
        }
        if (now.allocated_bytes > out.peak_allocated_after_event_bytes) {
          out.peak_allocated_after_event_bytes = now.allocated_bytes;
          out.peak_allocated_event = i;
        }
      }
      if (options.check_invariants) {  // the cached level is the engine's: a free never moved it
        PHASEALLOC_CHECK(eng.levels().reserved_bytes == modelled_reserved,
                         "event {} ({}) moved the reserved level from {} to {} bytes unseen", i, to_string(e.op),
                         modelled_reserved, eng.levels().reserved_bytes);
      }
      if (rec.available && (e.op == trace_event_op::alloc || e.op == trace_event_op::free) &&
          (e.flags & trace_flag::seeded) == 0) {
        const std::size_t modelled = modelled_reserved;
        if (modelled != recorded_level) {
          const reserved_divergence d{i, e.time_ns, e.op, recorded_level, modelled};
          const auto gap = [](const reserved_divergence& x) {
            return x.modelled_bytes > x.recorded_bytes ? x.modelled_bytes - x.recorded_bytes
                                                       : x.recorded_bytes - x.modelled_bytes;
          };
          if (!rec.first_divergence) rec.first_divergence = d;
          if (!rec.largest_divergence || gap(d) > gap(*rec.largest_divergence)) rec.largest_divergence = d;
        }
      }
      if (options.event_state != nullptr && options.snapshot_after_event == i) *options.event_state = eng.take_snapshot();
      if (stride != 0) {
        const memory_levels l = eng.levels();
        window.allocated_bytes = std::max(window.allocated_bytes, l.allocated_bytes);
        window.reserved_bytes = std::max(window.reserved_bytes, l.reserved_bytes);
        if ((i + 1) % stride == 0 || i + 1 == n) {
          window.event = i;
          window.time_ns = e.time_ns;
          out.timeline.push_back(window);
          window = timeline_point{};
        }
      }
      if (options.progress && (i + 1) % progress_every == 0) options.progress(i + 1, n);
    }
    rec.recorded_final_reserved_bytes = recorded_level;
    rec.recorded_final_segments = recorded_segments;
    out.bands.back().end_event = n;
    out.bands.back().end_ns = n == 0 ? 0 : t.events.back().time_ns;
    if (out.bands.front().first_event == out.bands.front().end_event && out.bands.size() > 1) {
      out.bands.erase(out.bands.begin());
    }

    const device_stats s = eng.stats();
    out.peak_reserved_bytes = static_cast<std::size_t>(s.reserved_bytes[stat_type::all].peak);
    out.peak_allocated_bytes = static_cast<std::size_t>(s.allocated_bytes[stat_type::all].peak);
    out.peak_requested_bytes = static_cast<std::size_t>(s.requested_bytes[stat_type::all].peak);
    out.final_segments = static_cast<std::size_t>(s.segment[stat_type::all].current);
    out.device_allocs = s.num_device_alloc;
    out.device_frees = s.num_device_free;
    out.device_maps = s.num_device_map;
    out.device_unmaps = s.num_device_unmap;
    out.alloc_retries = s.num_alloc_retries;
    out.ooms = s.num_ooms - relieved_failures;
    out.pressure_calls = pressure.calls_made();
    out.offloaded_bytes = static_cast<std::size_t>(s.offloaded_bytes[stat_type::all].allocated);
    for (const phase_stats& p : eng.phases()) out.restored_bytes += static_cast<std::size_t>(p.restored_bytes);
    const memory_levels end = eng.levels();
    out.final_reserved_bytes = end.reserved_bytes;
    out.final_allocated_bytes = end.allocated_bytes;
    out.final_requested_bytes = end.requested_bytes;
    for (const phase_stats& p : eng.phases()) {
      if (p.num_allocs == 0 && p.num_frees == 0 && p.name == "unphased") continue;
      if (p.intervals == 0) continue;
      out.phases.push_back(p);
      if (const auto it = extra_failures_by_phase.find(p.name); it != extra_failures_by_phase.end()) {
        out.phases.back().num_ooms -= it->second;  // a try the pressure handler answered is no out-of-memory
      }
    }
    // The phases the engine's books report, with their peaks (which see levels inside an operation).
    colocation_headroom measured = residency.finish();
    out.headroom.weighted_by = measured.weighted_by;
    out.headroom.transitions = std::move(measured.transitions);
    for (phase_residency& r : measured.phases) {
      const auto it = std::find_if(out.phases.begin(), out.phases.end(), [&](const phase_stats& p) { return p.name == r.name; });
      if (it == out.phases.end()) continue;
      r.peak_reserved_bytes = static_cast<std::size_t>(it->peak_reserved_bytes);
      out.headroom.phases.push_back(std::move(r));
    }
    if (options.final_state != nullptr) *options.final_state = eng.take_snapshot();
    eng.set_trace_sink(nullptr);
  }
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out.modeled_device_time_ns = dev.modeled_time_ns();
  return out;
}

std::string_view to_string(offload_replay mode) noexcept {
  switch (mode) {
    case offload_replay::recorded: return "recorded";
    case offload_replay::pressure: return "pressure";
    case offload_replay::none: return "none";
  }
  return "recorded";
}

std::optional<offload_replay> parse_offload_replay(std::string_view name) noexcept {
  for (const offload_replay mode : {offload_replay::recorded, offload_replay::pressure, offload_replay::none}) {
    if (to_string(mode) == name) return mode;
  }
  return std::nullopt;
}

}  // namespace phasealloc
