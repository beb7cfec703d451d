// replay_colocated: see the design note in phasealloc/replay/colocate.hpp.
#include "phasealloc/replay/colocate.hpp"

#include <chrono>
#include <limits>
#include <memory>
#include <unordered_set>

#include <fmt/format.h>

#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"
#include "replay_detail.hpp"

namespace phasealloc {
namespace {

/// One colocated process: its trace, its policy and engine, and where it is in its trace.
struct process_state {
  const trace* t = nullptr;
  std::unique_ptr<policy> pol;
  std::unique_ptr<engine> eng;
  std::unique_ptr<replay_detail::address_book> addresses;
  std::unordered_set<std::uint64_t> placed_by_layout;
  std::size_t next = 0;  ///< Index of its next event.
};

}  // namespace

result<colocated_result, std::string> replay_colocated(std::span<const trace> traces, std::string_view policy_spec,
                                                       const replay_options& options) {
  if (traces.empty()) return std::string("a colocated replay needs at least one trace");
  if (options.capacity_bytes == 0) return std::string("the model device's capacity is 0 bytes");
  std::vector<process_state> procs(traces.size());
  for (std::size_t p = 0; p < traces.size(); ++p) {
    auto made = make_policy(policy_spec);
    if (!made) return made.error();
    procs[p].pol = std::move(made).value();
    procs[p].t = &traces[p];
  }
  const policy& first_policy = *procs.front().pol;
  if (auto limit = memory_limit_bytes(first_policy.memory_fraction(), options.capacity_bytes); !limit) {
    return fmt::format("policy '{}': {}", first_policy.spec(), limit.error());
  }

  const bool virtual_memory = replay_detail::wants_virtual_memory(first_policy, options);
  // The device outlives the engines: they give their memory back to it when destroyed.
  model_device dev(replay_detail::replay_device_config(options, virtual_memory));

  colocated_result out;
  out.policy = first_policy.spec();
  out.device = virtual_memory ? "model (virtual memory)" : "model (whole segments)";
  out.capacity_bytes = options.capacity_bytes;
  out.processes.resize(procs.size());
  out.reserved_at_peak_bytes.assign(procs.size(), 0);
  for (const trace& t : traces) out.events += t.events.size();

  const bool use_layout = options.use_recorded_layout.value_or(first_policy.models_recorded_allocator());
  const auto started = std::chrono::steady_clock::now();
  const auto sample_total = [&](std::size_t merged_event, std::uint64_t time_ns) {
    const std::size_t total = dev.mapped_bytes();
    if (total <= out.peak_reserved_bytes) return;
    out.peak_reserved_bytes = total;
    out.peak_event = merged_event;
    out.peak_time_ns = time_ns;
    for (std::size_t p = 0; p < procs.size(); ++p) out.reserved_at_peak_bytes[p] = procs[p].eng->levels().reserved_bytes;
  };

  // Engines are created (and seeded) in trace order at time 0, as processes that start together.
  for (std::size_t p = 0; p < procs.size(); ++p) {
    process_state& s = procs[p];
    s.eng = std::make_unique<engine>(dev, *s.pol,
                                     engine_options{.strict = false, .check_invariants = options.check_invariants});
    s.addresses = std::make_unique<replay_detail::address_book>(*s.t);
    if (!use_layout) continue;
    std::vector<std::uint64_t> ids;
    const std::vector<seed_segment> layout = replay_detail::recorded_layout(*s.t, ids);
    if (layout.empty()) continue;
    auto seeded = s.eng->seed(layout);
    if (!seeded) return fmt::format("process {}: the trace's recorded layout: {}", p, seeded.error());
    for (std::size_t k = 0; k < ids.size(); ++k) {
      s.addresses->set(ids[k], seeded.value()[k]);
      s.placed_by_layout.insert(ids[k]);
    }
    out.processes[p].seeded_segments = layout.size();
  }
  if (dev.mapped_bytes() > 0) sample_total(0, 0);

  const std::size_t progress_every = std::max<std::size_t>(out.events / 100, 1);
  for (std::size_t merged = 0; merged < out.events; ++merged) {
    // The process whose next event comes first; ties to the earlier trace.
    std::size_t p = procs.size();
    std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t q = 0; q < procs.size(); ++q) {
      const process_state& s = procs[q];
      if (s.next >= s.t->events.size()) continue;
      const std::uint64_t time = s.t->events[s.next].time_ns;
      if (p == procs.size() || time < best) {
        p = q;
        best = time;
      }
    }
    process_state& s = procs[p];
    const std::size_t i = s.next++;
    const trace_event& e = s.t->events[i];
    switch (e.op) {
      case trace_event_op::alloc: {
        if ((e.flags & trace_flag::seeded) != 0 && s.placed_by_layout.contains(e.alloc_id)) break;
        auto r = s.eng->allocate(e.bytes, e.stream, e.tag);
        if (r) {
          s.addresses->set(e.alloc_id, r.value());
        } else if (r.error().code == errc::out_of_memory) {
          const colocated_oom oom{p, i, e.time_ns, static_cast<std::size_t>(e.bytes)};
          if (!out.processes[p].first_oom) out.processes[p].first_oom = oom;
          if (!out.first_oom) out.first_oom = oom;
        }
        break;
      }
      case trace_event_op::free: {
        const device_address a = s.addresses->take(e.alloc_id);
        if (a != 0) (void)s.eng->deallocate(a);
        break;
      }
      case trace_event_op::record_stream: {
        const device_address a = s.addresses->peek(e.alloc_id);
        if (a != 0) (void)s.eng->record_stream(a, e.stream);
        break;
      }
      case trace_event_op::phase: {
        const std::string name = e.name < s.t->strings.size() ? s.t->strings[e.name] : std::string();
        s.eng->set_phase(name.empty() ? std::string_view("unphased") : std::string_view(name));
        break;
      }
      case trace_event_op::empty_cache:
        s.eng->empty_cache();
        break;
      default:  // the recording allocator's own segment events and OOMs: not followed
        break;
    }
    sample_total(merged, e.time_ns);
    if (options.progress && (merged + 1) % progress_every == 0) options.progress(merged + 1, out.events);
  }

  for (std::size_t p = 0; p < procs.size(); ++p) {
    const device_stats st = procs[p].eng->stats();
    colocated_process& x = out.processes[p];
    x.events = procs[p].t->events.size();
    x.peak_reserved_bytes = static_cast<std::size_t>(st.reserved_bytes[stat_type::all].peak);
    x.peak_allocated_bytes = static_cast<std::size_t>(st.allocated_bytes[stat_type::all].peak);
    x.peak_requested_bytes = static_cast<std::size_t>(st.requested_bytes[stat_type::all].peak);
    x.final_reserved_bytes = procs[p].eng->levels().reserved_bytes;
    x.device_allocs = st.num_device_alloc;
    x.device_frees = st.num_device_free;
    x.device_maps = st.num_device_map;
    x.device_unmaps = st.num_device_unmap;
    x.ooms = st.num_ooms;
    out.ooms += st.num_ooms;
  }
  procs.clear();  // the engines give their memory back before the device goes
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out.modeled_device_time_ns = dev.modeled_time_ns();
  return out;
}

}  // namespace phasealloc
