// The replay's outputs: the side-by-side text tables and the JSON document (the contract scripts
// rely on: trace, floor_bytes, results[policy, peak_reserved_bytes, peak_allocated_bytes,
// device_allocs, device_frees, ooms, phases[name, peak_reserved_bytes, peak_allocated_bytes,
// fragmentation]], plus more keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "phasealloc/replay/replay.hpp"

namespace phasealloc::cli {

struct replay_report {
  std::string trace_name;
  std::uint64_t events = 0;
  std::uint64_t floor_bytes = 0;  ///< Peak live (requested) bytes: no allocator goes below it.
  std::size_t capacity_bytes = 0;
  std::vector<replay_result> results;
};

std::string render_replay_text(const replay_report& report);
nlohmann::json replay_json(const replay_report& report);
/// Writes the HTML report of `report` to `path`; throws command_error naming the path on failure.
void write_replay_html(const std::string& path, const replay_report& report, const std::string& generated_by);

}  // namespace phasealloc::cli
