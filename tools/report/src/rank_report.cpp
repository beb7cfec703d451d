// The per-rank page (report.hpp): the device totals of every rank, and a CSS-only rank selector
// over each rank's report.
#include <fmt/format.h>

#include "html_escape.hpp"
#include "html_legend.hpp"
#include "phasealloc/oom_report.hpp"
#include "phasealloc/report/report.hpp"
#include "report_page.hpp"

namespace phasealloc {
namespace {

using namespace report_detail;

/// Gives every id (and every url(#id) reference) in `html` the prefix, so that several reports on
/// one page keep unique ids. Text inside the page went through html_escape, so an id="..." or
/// url(#...) in it is markup.
std::string prefix_ids(std::string html, const std::string& prefix) {
  for (const std::string& marker : {std::string("id=\""), std::string("url(#")}) {
    for (std::size_t at = html.find(marker); at != std::string::npos; at = html.find(marker, at)) {
      at += marker.size();
      html.insert(at, prefix);
      at += prefix.size();
    }
  }
  return html;
}

std::string totals_table(const std::vector<rank_report_input>& ranks, std::size_t gpu_bytes) {
  std::string out = R"(<table class="results"><thead><tr><th>rank</th><th>NCCL (outside the allocator)</th>)";
  const std::vector<replay_result>& first = ranks.front().report.results;
  for (std::size_t p = 0; p < first.size(); ++p) out += "<th>" + policy_label(p, first[p].policy) + "</th>";
  out += "</tr></thead><tbody>";
  for (const rank_report_input& r : ranks) {
    out += fmt::format("<tr><td>{}</td><td>{}</td>", html_escape(r.label),
                       r.nccl_bytes ? format_bytes(*r.nccl_bytes) : std::string("unknown"));
    for (const replay_result& res : r.report.results) {
      if (res.ooms > 0) {
        out += fmt::format(R"(<td class="warn">out of memory ({} allocations)</td>)", res.ooms);
      } else if (r.nccl_bytes) {
        out += fmt::format("<td>{}</td>", format_bytes(res.peak_reserved_bytes + *r.nccl_bytes));
      } else {
        out += fmt::format("<td>at least {}</td>", format_bytes(res.peak_reserved_bytes));
      }
    }
    out += "</tr>";
  }
  out += "</tbody></table>";
  out += fmt::format(
      R"(<ul class="notes"><li>Device total = the allocator's peak reserved + NCCL's buffers, on a {} GPU; )"
      R"(each rank's allocator was replayed on the GPU less its NCCL buffers.</li></ul>)",
      format_bytes(gpu_bytes));
  return out;
}

}  // namespace

std::string render_rank_report(const std::vector<rank_report_input>& ranks, std::size_t gpu_bytes,
                               const std::string& generated_by) {
  std::string page = page_head(fmt::format("{} ranks", ranks.size()));
  page += "<style>.rank-pages > input{position:absolute;opacity:0}.rank-page{display:none}"
          ".rank-selector label{display:inline-block;padding:.3em .8em;margin:0 .3em .3em 0;border:1px solid #888;"
          "border-radius:4px;cursor:pointer}";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    page += fmt::format("#rank-select-{0}:checked ~ #rank-page-{0}{{display:block}}"
                        "#rank-select-{0}:checked ~ .rank-selector label[for=rank-select-{0}]{{font-weight:bold;"
                        "background:#eee}}",
                        i);
  }
  page += "</style>\n</head>\n<body>\n<main>\n";
  page += fmt::format("<header><h1>Allocator policies per rank: {} ranks</h1></header>\n", ranks.size());
  if (ranks.empty()) return page + "<p>No rank made an allocation.</p>\n" + page_foot(generated_by);
  page += R"(<section id="ranks"><h2>Device memory per rank</h2>)" + totals_table(ranks, gpu_bytes) + "</section>\n";
  page += R"(<section class="rank-pages"><h2>Rank</h2>)";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    page += fmt::format(R"(<input type="radio" name="rank" id="rank-select-{}"{}>)", i, i == 0 ? " checked" : "");
  }
  page += R"(<nav class="rank-selector">)";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    page += fmt::format(R"(<label for="rank-select-{}">{}</label>)", i, html_escape(ranks[i].label));
  }
  page += "</nav>\n";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    page += fmt::format(R"(<div class="rank-page" id="rank-page-{}">)", i);
    page += prefix_ids(report_body(ranks[i].report, "h2"), fmt::format("rank{}-", i));
    page += "</div>\n";
  }
  page += "</section>\n";
  page += page_foot(generated_by);
  return page;
}

result<std::monostate, std::string> write_rank_report(const std::filesystem::path& path,
                                                      const std::vector<rank_report_input>& ranks,
                                                      std::size_t gpu_bytes, const std::string& generated_by) {
  return write_page(path, render_rank_report(ranks, gpu_bytes, generated_by));
}

}  // namespace phasealloc
