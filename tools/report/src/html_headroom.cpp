#include "html_headroom.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "html_escape.hpp"
#include "html_legend.hpp"
#include "phasealloc/oom_report.hpp"
#include "report_format.hpp"

namespace phasealloc::report_detail {
namespace {

std::string held_table(const report_input& input) {
  std::vector<std::string> names;
  for (const replay_result& r : input.results) {
    for (const phase_residency& p : r.headroom.phases) {
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
    }
  }
  std::string rows;
  for (const std::string& name : names) {
    std::vector<std::pair<std::size_t, const phase_residency*>> entries;
    for (std::size_t i = 0; i < input.results.size(); ++i) {
      if (const phase_residency* p = input.results[i].headroom.phase(name)) entries.emplace_back(i, p);
    }
    for (std::size_t k = 0; k < entries.size(); ++k) {
      const auto [i, p] = entries[k];
      std::string phase_cell;
      if (k == 0) {
        phase_cell = phase_group_cell(name, entries.size());
      }
      rows += fmt::format(R"(<tr class="{}">{}<td class="policy-cell">{}</td><td class="num">{}</td>)"
                          R"(<td class="num">{}</td><td class="num">{}</td></tr>)",
                          k == 0 ? "group-start" : "", phase_cell, policy_label(i, input.results[i].policy),
                          format_bytes(p->peak_reserved_bytes),
                          format_bytes(static_cast<std::size_t>(p->mean_reserved_bytes)), format_count(p->intervals));
    }
  }
  const std::string weighted = input.results.front().headroom.weighted_by == "time" ? "time" : "event";
  return fmt::format(
      R"(<div class="scroll"><table class="phases"><thead><tr><th>phase</th><th>policy</th>)"
      R"(<th class="num">reserved, peak</th><th class="num">reserved, {}-weighted mean</th>)"
      R"(<th class="num">intervals</th></tr></thead><tbody>{}</tbody></table></div>)",
      weighted, rows);
}

std::string returned_table(const report_input& input) {
  std::vector<std::pair<std::string, std::string>> kinds;
  std::vector<std::vector<transition_summary>> per_policy;
  for (const replay_result& r : input.results) {
    per_policy.push_back(r.headroom.summarize_transitions());
    for (const transition_summary& t : per_policy.back()) {
      if (std::find(kinds.begin(), kinds.end(), std::pair(t.from, t.to)) == kinds.end()) kinds.emplace_back(t.from, t.to);
    }
  }
  if (kinds.empty()) return {};
  std::string rows;
  for (const auto& [from, to] : kinds) {
    for (std::size_t i = 0; i < per_policy.size(); ++i) {
      const auto it = std::find_if(per_policy[i].begin(), per_policy[i].end(),
                                   [&](const transition_summary& t) { return t.from == from && t.to == to; });
      if (it == per_policy[i].end()) continue;
      std::string kind_cell;
      if (i == 0) {
        kind_cell = fmt::format(R"(<th scope="rowgroup" rowspan="{}">{} )" "\u2192" R"( {}</th>)", per_policy.size(),
                                html_escape(from), html_escape(to));
      }
      rows += fmt::format(R"(<tr class="{}">{}<td class="policy-cell">{}</td><td class="num">{}</td>)"
                          R"(<td class="num">{}</td><td class="num">{}</td></tr>)",
                          i == 0 ? "group-start" : "", kind_cell, policy_label(i, input.results[i].policy),
                          format_bytes(static_cast<std::size_t>(it->returned_mean_bytes())),
                          format_bytes(it->returned_max_bytes), format_count(static_cast<std::int64_t>(it->count)));
    }
  }
  return fmt::format(
      R"(<div class="scroll"><table class="phases"><thead><tr><th>transition</th><th>policy</th>)"
      R"(<th class="num">returned, mean</th><th class="num">returned, largest</th><th class="num">transitions</th>)"
      R"(</tr></thead><tbody>{}</tbody></table></div>)",
      rows);
}

}  // namespace

std::string render_headroom_tables(const report_input& input) {
  const bool any = std::any_of(input.results.begin(), input.results.end(),
                               [](const replay_result& r) { return !r.headroom.phases.empty(); });
  if (!any) return R"(<p class="empty">No phase statistics: the trace has no phase events.</p>)";
  return held_table(input) + returned_table(input);
}

}  // namespace phasealloc::report_detail
