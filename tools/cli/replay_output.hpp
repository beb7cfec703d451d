// The replay's outputs: the side-by-side text tables and the JSON document (the contract scripts
// rely on: trace, floor_bytes, results[policy, peak_reserved_bytes, peak_allocated_bytes,
// device_allocs, device_frees, ooms, phases[name, peak_reserved_bytes, peak_allocated_bytes,
// fragmentation]], plus more keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "phasealloc/replay/colocate.hpp"
#include "phasealloc/replay/peak_explain.hpp"
#include "phasealloc/replay/replay.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc::cli {

struct replay_report {
  std::string trace_name;
  std::uint64_t events = 0;
  std::uint64_t floor_bytes = 0;  ///< Peak live (requested) bytes: no allocator goes below it.
  std::size_t capacity_bytes = 0;
  std::size_t link_bytes_per_second = 0;  ///< For the modelled time of offload copies (0: not given).
  std::vector<replay_result> results;
  /// What the input said about itself that bears on the numbers (device chosen, baseline, seeding).
  std::vector<std::string> notes;
  /// Where the recorded reserved level comes from ("" when the trace has none).
  std::string recorded_source;
};

/// The notes worth printing about a loaded trace, from its import properties.
std::vector<std::string> input_notes(const trace& t);
/// "snapshot segments and history", "kineto Total Reserved": "" when the trace holds no reserved
/// level recorded by PyTorch's allocator (phasealloc's own recordings included).
std::string recorded_source(const trace& t);
/// The fidelity lines: for each result with a recorded reserved level, recorded against modelled
/// peak reserved and segments, the first point where the levels differ and the largest gap.
std::string render_fidelity_text(const replay_report& report);

std::string render_replay_text(const replay_report& report);
nlohmann::json replay_json(const replay_report& report);
/// Writes the HTML report of `report` to `path`; throws command_error naming the path on failure.
void write_replay_html(const std::string& path, const replay_report& report, const std::string& generated_by);

/// replay --colocate: the processes' traces and one colocated result per policy.
struct colocated_report {
  std::vector<std::string> trace_names;  ///< Per process, in command-line order.
  std::vector<std::uint64_t> events;
  std::vector<std::uint64_t> floor_bytes;  ///< Per process: its peak live bytes.
  std::size_t capacity_bytes = 0;
  std::vector<colocated_result> results;
};

/// Per policy: each process's peak reserved, peak allocated, OOMs and first OOM, the device's total
/// peak, and which process ran out of memory first.
std::string render_colocated_text(const colocated_report& report);
/// The same as one JSON document: colocated, capacity_bytes, processes[process, trace, events,
/// floor_bytes], results[policy, device, peak_reserved_bytes (the device's total), peak_time_ns,
/// peak_event, reserved_at_peak_bytes[], ooms, first_oom, processes[...]].
nlohmann::json colocated_json(const colocated_report& report);

/// replay --explain-peak as JSON: per policy, the peaks, the page unit, and at_peak_reserved /
/// at_peak_allocated (event, phase, levels, and per pool every field of pool_peak_part, names as in
/// the struct).
nlohmann::json peak_explanations_json(const std::vector<peak_explanation>& explained);

}  // namespace phasealloc::cli
