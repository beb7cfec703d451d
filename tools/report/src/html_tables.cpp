#include "html_tables.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "html_escape.hpp"
#include "html_legend.hpp"
#include "measures.hpp"
#include "palette.hpp"
#include "phasealloc/oom_report.hpp"
#include "report_format.hpp"

namespace phasealloc::report_detail {
namespace {

std::string bytes_cell(std::int64_t bytes) {
  return fmt::format(R"(<td class="num">{}</td>)", format_bytes(static_cast<std::size_t>(std::max<std::int64_t>(0, bytes))));
}

std::string calls_cell(std::int64_t allocs, std::int64_t frees, std::int64_t maps, std::int64_t unmaps) {
  return fmt::format(R"(<td class="num">{}<span class="sub block">{} / {} / {} / {}</span></td>)",
                     format_count(allocs + frees + maps + unmaps), format_count(allocs), format_count(frees),
                     format_count(maps), format_count(unmaps));
}

std::string ooms_cell(std::int64_t ooms) {
  return ooms > 0 ? fmt::format(R"(<td class="num oom-count">{}</td>)", format_count(ooms))
                  : std::string(R"(<td class="num">0</td>)");
}

}  // namespace

std::string render_results_table(const report_input& input) {
  if (input.results.empty()) return R"(<p class="empty">No policy was replayed.</p>)";
  const replay_result& baseline = input.results.front();
  const std::optional<std::size_t> best = lowest_peak_policy(input);
  std::string rows;
  for (std::size_t i = 0; i < input.results.size(); ++i) {
    const replay_result& r = input.results[i];
    std::string vs_first = "\u2014";
    if (i > 0 && baseline.peak_reserved_bytes > 0) {
      const double change = static_cast<double>(r.peak_reserved_bytes) / static_cast<double>(baseline.peak_reserved_bytes) - 1;
      vs_first = (change > 0 ? "+" : change < 0 ? "\u2212" : "") + format_percent(std::abs(change));
    }
    const auto above_floor = static_cast<std::int64_t>(r.peak_reserved_bytes) - static_cast<std::int64_t>(input.floor_bytes);
    std::string classes;
    if (r.ooms > 0) classes += " oom";
    if (best && *best == i) classes += " best";
    rows += fmt::format(
        R"(<tr class="{}"><td class="policy-cell">{}{}{}<span class="sub block">{}</span></td><td class="num strong">{}</td>)"
        R"(<td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td>{})"
        R"(<td class="num">{}</td><td class="num">{}</td>{}</tr>)",
        classes.empty() ? "" : classes.substr(1), policy_label(i, r.policy),
        best && *best == i ? R"( <span class="badge best">lowest</span>)" : "",
        oom_badge(r.ooms), html_escape(r.device), format_bytes(r.peak_reserved_bytes), vs_first,
        format_bytes(r.peak_allocated_bytes), format_percent(r.fragmentation()), format_signed_bytes(above_floor),
        calls_cell(r.device_allocs, r.device_frees, r.device_maps, r.device_unmaps),
        format_count(r.alloc_retries), format_duration_ns(r.modeled_device_time_ns), ooms_cell(r.ooms));
  }
  return fmt::format(
      R"(<div class="scroll"><table class="results"><thead><tr><th>policy <span class="sub block">device</span></th>)"
      R"(<th class="num">peak reserved</th><th class="num">vs {}</th><th class="num">peak allocated</th>)"
      R"(<th class="num">fragmentation</th><th class="num">reserved )" "\u2212" R"( floor</th>)"
      R"(<th class="num">device calls <span class="sub block">allocs / frees / maps / unmaps</span></th>)"
      R"(<th class="num">retries</th><th class="num">modelled device time</th><th class="num">OOMs</th></tr></thead>)"
      R"(<tbody>{}</tbody></table></div>)",
      html_escape(baseline.policy), rows);
}

std::string render_phase_table(const report_input& input) {
  std::vector<std::string> phases;
  for (const replay_result& r : input.results) {
    for (const phase_stats& p : r.phases) {
      if (std::find(phases.begin(), phases.end(), p.name) == phases.end()) phases.push_back(p.name);
    }
  }
  if (phases.empty()) return R"(<p class="empty">No phase statistics: the trace has no phase events.</p>)";
  // A column for same-address offload only where some policy moved bytes (a trace with offload calls).
  bool offload = false;
  for (const replay_result& r : input.results) {
    for (const phase_stats& p : r.phases) offload = offload || p.offloaded_bytes != 0 || p.restored_bytes != 0;
  }

  std::string rows;
  for (const std::string& phase : phases) {
    std::vector<std::pair<std::size_t, const phase_stats*>> entries;
    for (std::size_t i = 0; i < input.results.size(); ++i) {
      for (const phase_stats& p : input.results[i].phases) {
        if (p.name == phase) entries.emplace_back(i, &p);
      }
    }
    for (std::size_t k = 0; k < entries.size(); ++k) {
      const auto [i, p] = entries[k];
      std::string phase_cell;
      if (k == 0) {
        phase_cell = phase_group_cell(phase, entries.size());
      }
      rows += fmt::format(
          R"(<tr class="{}{}">{}<td class="policy-cell">{}</td>{}{}<td class="num">{}</td>{}<td class="num">{} / {}</td>)"
          R"({}{}{}<td class="num">{}</td>{}</tr>)",
          k == 0 ? "group-start" : "", p->num_ooms > 0 ? " oom" : "", phase_cell, policy_label(i, input.results[i].policy),
          bytes_cell(p->peak_allocated_bytes), bytes_cell(p->peak_reserved_bytes), format_percent(p->fragmentation()),
          bytes_cell(p->reserved_unallocated_at_peak_bytes), format_count(p->num_allocs), format_count(p->num_frees),
          calls_cell(p->num_device_alloc, p->num_device_free, p->num_device_map, p->num_device_unmap),
          bytes_cell(p->released_bytes),
          offload ? fmt::format(R"(<td class="num">{} / {}</td>)", format_bytes(p->offloaded_bytes),
                                format_bytes(p->restored_bytes))
                  : std::string(),
          format_count(p->num_alloc_retries), ooms_cell(p->num_ooms));
    }
  }
  return fmt::format(
      R"(<div class="scroll"><table class="phases"><thead><tr><th>phase</th><th>policy</th>)"
      R"(<th class="num">peak allocated</th><th class="num">peak reserved</th><th class="num">fragmentation</th>)"
      R"(<th class="num">reserved )" "\u2212" R"( allocated at peak</th><th class="num">allocs / frees</th>)"
      R"(<th class="num">device calls <span class="sub block">allocs / frees / maps / unmaps</span></th>)"
      R"(<th class="num">released</th>{}<th class="num">retries</th><th class="num">OOMs</th></tr></thead>)"
      R"(<tbody>{}</tbody></table></div>)",
      offload ? R"(<th class="num">offloaded / restored</th>)" : "", rows);
}

}  // namespace phasealloc::report_detail
