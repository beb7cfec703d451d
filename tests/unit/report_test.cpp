// The HTML report: well-formed, self-contained, everything escaped, edge cases said in words.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/report/report.hpp"
#include "report_fixtures.hpp"

namespace phasealloc {
namespace {

std::size_t count(std::string_view haystack, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t at = haystack.find(needle); at != std::string_view::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

/// Walks the tags with a stack: every non-void element closes, in order. Returns "" or the problem.
std::string tag_balance_error(std::string_view html) {
  static const std::vector<std::string_view> void_elements = {"meta", "br", "hr", "img", "input", "link", "wbr"};
  std::vector<std::string> open;
  std::size_t at = 0;
  while ((at = html.find('<', at)) != std::string_view::npos) {
    const std::size_t end = html.find('>', at);
    if (end == std::string_view::npos) return "unterminated tag at " + std::to_string(at);
    std::string_view tag = html.substr(at + 1, end - at - 1);
    at = end + 1;
    if (tag.starts_with('!')) continue;  // <!DOCTYPE html>
    const bool closing = tag.starts_with('/');
    const bool self_closing = tag.ends_with('/');
    if (closing) tag.remove_prefix(1);
    const std::string name(tag.substr(0, tag.find_first_of(" \t\n/")));
    if (name.empty()) return "empty tag name before " + std::to_string(at);
    if (closing) {
      if (open.empty() || open.back() != name) {
        return "</" + name + "> closes <" + (open.empty() ? std::string("nothing") : open.back()) + "> at " +
               std::to_string(at);
      }
      open.pop_back();
    } else if (!self_closing && std::find(void_elements.begin(), void_elements.end(), name) == void_elements.end()) {
      open.push_back(name);
      if (name == "style") {  // raw text: skip to its end tag
        const std::size_t close = html.find("</style>", at);
        if (close == std::string_view::npos) return "unterminated <style>";
        at = close;
      }
    }
  }
  return open.empty() ? std::string() : "unclosed <" + open.back() + ">";
}

/// Every "http" on the page is the SVG namespace.
bool only_svg_namespace_urls(std::string_view html) {
  constexpr std::string_view ns = "http://www.w3.org/2000/svg";
  for (std::size_t at = html.find("http"); at != std::string_view::npos; at = html.find("http", at + 1)) {
    if (html.substr(at, ns.size()) != ns) return false;
  }
  return true;
}

/// The first tag (between '<' and '>', so never escaped text) that carries the attribute, or "".
std::string tag_with_attribute(std::string_view html, std::string_view attribute) {
  const std::string needle = " " + std::string(attribute) + "=";
  for (std::size_t at = html.find('<'); at != std::string_view::npos; at = html.find('<', at + 1)) {
    const std::string_view tag = html.substr(at, html.find('>', at) - at);
    if (tag.starts_with("<style")) {
      at = html.find("</style>", at);
      continue;
    }
    if (tag.find(needle) != std::string_view::npos) return std::string(tag);
  }
  return {};
}

std::string escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

void expect_self_contained_and_well_formed(const std::string& html) {
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  EXPECT_EQ(tag_balance_error(html), "");
  EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
  EXPECT_TRUE(only_svg_namespace_urls(html));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  // url() only to an element of the page itself ("url(#id)").
  for (std::size_t at = html.find("url("); at != std::string::npos; at = html.find("url(", at + 1)) {
    EXPECT_EQ(html.substr(at, 5), "url(#");
  }
  EXPECT_EQ(tag_with_attribute(html, "src"), "");
  EXPECT_EQ(tag_with_attribute(html, "href"), "");
}

report_testing::synthetic_options small() {
  report_testing::synthetic_options o;
  o.events = 4'000;
  o.timeline_points = 1'000;
  return o;
}

/// One result made by hand with round numbers.
replay_result hand_result(std::string policy, std::size_t reserved_gib, std::size_t allocated_gib) {
  replay_result r;
  r.policy = std::move(policy);
  r.device = "model (whole segments)";
  r.capacity_bytes = 80 * gib;
  r.events = 4;
  r.peak_reserved_bytes = reserved_gib * gib;
  r.peak_allocated_bytes = allocated_gib * gib;
  r.device_allocs = 3;
  r.device_frees = 1;
  r.modeled_device_time_ns = 120'000;
  for (std::size_t i = 0; i < 4; ++i) {
    r.timeline.push_back({i, (i + 1) * 1'000'000, allocated_gib * gib * (i + 1) / 4, reserved_gib * gib * (i + 1) / 4});
  }
  return r;
}

TEST(report, full_report_is_well_formed_and_self_contained) {
  const report_input in = report_testing::make_synthetic_report(small());
  const std::string html = render_html_report(in);
  expect_self_contained_and_well_formed(html);
  EXPECT_GE(count(html, "<svg xmlns=\"http://www.w3.org/2000/svg\""), 2u);  // timeline + phase bars
  EXPECT_NE(html.find("id=\"timeline\""), std::string::npos);
  EXPECT_NE(html.find("id=\"phase-bars\""), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);
}

TEST(report, every_policy_name_appears_escaped_and_never_raw) {
  const report_input in = report_testing::make_synthetic_report(small());
  const std::string html = render_html_report(in);
  ASSERT_EQ(in.results.size(), 4u);
  for (const replay_result& r : in.results) {
    EXPECT_NE(html.find(escaped(r.policy)), std::string::npos) << r.policy;
  }
  EXPECT_EQ(html.find("<tight"), std::string::npos);
  EXPECT_EQ(html.find("\"cap\""), std::string::npos);
  EXPECT_NE(html.find("tag=&lt;tight &amp; &quot;cap&quot;&gt;"), std::string::npos);
  EXPECT_NE(html.find(escaped(in.trace_name)), std::string::npos);
  EXPECT_EQ(html.find("<7b>"), std::string::npos);
}

TEST(report, hostile_text_is_escaped_everywhere) {
  report_input in;
  in.trace_name = "<script>alert('t')</script>";
  in.generated_by = "phasealloc report x --policy '<img src=x onerror=alert(1)>'";
  in.floor_bytes = 1 * gib;
  in.capacity_bytes = 8 * gib;
  replay_result r = hand_result("pytorch:<b>bold</b>&amp;", 2, 1);
  r.bands = {{"<i>phase</i>", 0, 4, 0, 4'000'000}};
  phase_stats p;
  p.name = "<i>phase</i>";
  p.intervals = 1;
  p.peak_reserved_bytes = static_cast<std::int64_t>(2 * gib);
  p.peak_allocated_bytes = static_cast<std::int64_t>(1 * gib);
  r.phases = {p};
  r.device = "<dev>";
  in.results = {r};
  const std::string html = render_html_report(in);
  expect_self_contained_and_well_formed(html);
  for (const std::string_view raw : {"<script", "<img", "<b>", "<i>", "<dev>"}) {
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
  }
  EXPECT_NE(html.find("&lt;script&gt;alert(&#39;t&#39;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("pytorch:&lt;b&gt;bold&lt;/b&gt;&amp;amp;"), std::string::npos);
  EXPECT_NE(html.find("&lt;i&gt;phase&lt;/i&gt;"), std::string::npos);
}

TEST(report, phase_names_appear_in_bands_bars_and_table) {
  const std::string html = render_html_report(report_testing::make_synthetic_report(small()));
  for (const std::string_view phase : {"generation", "inference", "training", "optimizer"}) {
    EXPECT_NE(html.find(std::string(">") + std::string(phase) + "</text>"), std::string::npos) << phase;  // chart labels
    EXPECT_NE(html.find(std::string(phase) + "</th>"), std::string::npos) << phase;                        // table
  }
  EXPECT_NE(html.find("class=\"bands\""), std::string::npos);
}

TEST(report, the_phase_table_shows_offloaded_bytes_only_where_a_policy_moved_some) {
  report_input input = report_testing::make_synthetic_report(small());
  EXPECT_EQ(render_html_report(input).find("offloaded / restored"), std::string::npos);
  input.results.front().phases.front().offloaded_bytes = 3 << 20;
  input.results.front().phases.front().restored_bytes = 1 << 20;
  const std::string html = render_html_report(input);
  EXPECT_NE(html.find("offloaded / restored</th>"), std::string::npos);
  EXPECT_NE(html.find(">3.00 MiB / 1.00 MiB</td>"), std::string::npos);
}

TEST(report, measures_are_computed_as_design_md_defines_them) {
  report_input in;
  in.trace_name = "t";
  in.floor_bytes = 6 * gib;
  in.capacity_bytes = 80 * gib;
  in.results = {hand_result("pytorch", 10, 7), hand_result("phasealloc", 8, 7)};
  in.results[0].peak_allocated_bytes = 7 * gib + gib / 2;  // 7.5 / 10 -> 25.0 %
  const std::string html = render_html_report(in);
  expect_self_contained_and_well_formed(html);
  EXPECT_NE(html.find("25.0%"), std::string::npos);     // fragmentation of pytorch
  EXPECT_NE(html.find("12.5%"), std::string::npos);     // 1 - 7/8
  EXPECT_NE(html.find("+4.00 GiB"), std::string::npos); // reserved - floor, pytorch
  EXPECT_NE(html.find("+2.00 GiB"), std::string::npos); // phasealloc
  EXPECT_NE(html.find("\u221220.0%"), std::string::npos);  // phasealloc vs pytorch
  EXPECT_NE(html.find("10.00 GiB"), std::string::npos);
  EXPECT_NE(html.find("120.0 \u00b5s"), std::string::npos);  // modelled device time
  EXPECT_NE(html.find("class=\"badge best\""), std::string::npos);
  EXPECT_NE(html.find("floor (peak live) 6.00 GiB"), std::string::npos);
}

TEST(report, byte_ticks_read_in_one_unit) {
  report_input in;
  in.trace_name = "t";
  in.floor_bytes = 50 * gib;
  in.results = {hand_result("pytorch", 70, 55)};
  const std::string html = render_html_report(in);
  for (const std::string_view tick : {">20 GiB<", ">40 GiB<", ">60 GiB<", ">80 GiB<"}) {
    EXPECT_NE(html.find(tick), std::string::npos) << tick;
  }
}

TEST(report, long_timelines_are_thinned_but_keep_their_peak) {
  report_input in;
  in.trace_name = "long";
  replay_result r;
  r.policy = "pytorch";
  r.events = 100'000;
  for (std::size_t i = 0; i < 100'000; ++i) {
    const std::size_t bytes = (i == 53'457 ? 40 : 10) * gib;
    r.timeline.push_back({i, 0, bytes / 2, bytes});
  }
  r.peak_reserved_bytes = 40 * gib;
  r.peak_allocated_bytes = 20 * gib;
  in.results = {r};
  const std::string html = render_html_report(in);
  expect_self_contained_and_well_formed(html);
  const std::size_t at = html.find("<polyline class=\"reserved\" points=\"");
  ASSERT_NE(at, std::string::npos);
  const std::size_t from = html.find("points=\"", at) + 8;
  const std::string points = html.substr(from, html.find('"', from) - from);
  const std::size_t n = count(points, " ") + 1;
  EXPECT_LE(n, 2'001u);
  EXPECT_GE(n, 1'000u);
  // The y axis tops at or above 40 GiB and one point sits at 40 GiB: the spike survived thinning.
  EXPECT_NE(html.find("event index"), std::string::npos);
  EXPECT_NE(html.find("peak reserved 40.00 GiB"), std::string::npos);
  std::vector<double> ys;
  for (std::size_t p = 0; p < points.size();) {
    const std::size_t comma = points.find(',', p);
    const std::size_t space = std::min(points.find(' ', comma), points.size());
    ys.push_back(std::stod(points.substr(comma + 1, space - comma - 1)));
    p = space + 1;
  }
  const double top = *std::min_element(ys.begin(), ys.end());
  EXPECT_EQ(std::count(ys.begin(), ys.end(), top), 1);
  EXPECT_LT(top, *std::max_element(ys.begin(), ys.end()) - 100);  // well above the 10 GiB plateau
}

TEST(report, one_policy) {
  report_testing::synthetic_options o = small();
  o.policies = {"pytorch"};
  o.add_oom_policy = false;
  const std::string html = render_html_report(report_testing::make_synthetic_report(o));
  expect_self_contained_and_well_formed(html);
  EXPECT_NE(html.find("1</strong> policy"), std::string::npos);
  EXPECT_EQ(html.find("class=\"badge best\""), std::string::npos);  // nothing to compare with
  EXPECT_EQ(count(html, "<polyline class=\"reserved\""), 1u);
}

TEST(report, zero_events) {
  report_testing::synthetic_options o = small();
  o.events = 0;
  const std::string html = render_html_report(report_testing::make_synthetic_report(o));
  expect_self_contained_and_well_formed(html);
  EXPECT_NE(html.find("The trace has no events"), std::string::npos);
  EXPECT_EQ(html.find("id=\"timeline\""), std::string::npos);
  EXPECT_NE(html.find("No phase statistics"), std::string::npos);
}

TEST(report, no_results) {
  report_input in;
  in.trace_name = "nothing";
  const std::string html = render_html_report(in);
  expect_self_contained_and_well_formed(html);
  EXPECT_NE(html.find("No policy was replayed"), std::string::npos);
}

TEST(report, no_timeline_samples) {
  report_input in;
  in.trace_name = "t";
  in.results = {hand_result("pytorch", 2, 1)};
  in.results[0].timeline.clear();
  const std::string html = render_html_report(in);
  expect_self_contained_and_well_formed(html);
  EXPECT_NE(html.find("kept no timeline samples"), std::string::npos);
}

TEST(report, policy_with_ooms_is_marked) {
  const report_input in = report_testing::make_synthetic_report(small());
  ASSERT_GT(in.results.back().ooms, 0);
  const std::string html = render_html_report(in);
  EXPECT_NE(html.find("class=\"warn\""), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"oom\">"), std::string::npos);
  EXPECT_NE(html.find("class=\"badge oom\""), std::string::npos);
  EXPECT_NE(html.find("class=\"num oom-count\""), std::string::npos);
  EXPECT_NE(html.find("class=\"bar-label oom\""), std::string::npos);
  EXPECT_NE(html.find("class=\"capacity\""), std::string::npos);  // it reached the capacity: the line is drawn
  // The lowest-peak badge ignores the policy that failed allocations.
  EXPECT_EQ(html.find("tag=&lt;tight &amp; &quot;cap&quot;&gt;</span> <span class=\"badge best\""), std::string::npos);
}

TEST(report, phases_absent_means_no_bands) {
  report_input in;
  in.trace_name = "t";
  in.floor_bytes = gib;
  in.results = {hand_result("pytorch", 2, 1), hand_result("phasealloc", 2, 1)};
  for (replay_result& r : in.results) r.bands = {{"unphased", 0, 4, 0, 4'000'000}};
  const std::string html = render_html_report(in);
  expect_self_contained_and_well_formed(html);
  EXPECT_EQ(html.find("class=\"bands\""), std::string::npos);
  EXPECT_EQ(html.find("id=\"phase-bars\""), std::string::npos);
  EXPECT_NE(html.find("no phase events"), std::string::npos);
  EXPECT_NE(html.find("time since the start"), std::string::npos);
}

TEST(report, many_phases_and_policies_widen_the_bar_chart) {
  report_input in;
  in.trace_name = "t";
  for (std::size_t i = 0; i < 12; ++i) {
    replay_result r = hand_result("policy-" + std::to_string(i), 4, 2);
    for (std::size_t k = 0; k < 9; ++k) {
      phase_stats p;
      p.name = "phase-" + std::to_string(k);
      p.intervals = 1;
      p.peak_reserved_bytes = static_cast<std::int64_t>((k + 1) * gib / 2);
      p.peak_allocated_bytes = p.peak_reserved_bytes / 2;
      r.phases.push_back(p);
    }
    in.results.push_back(r);
  }
  const std::string html = render_html_report(in);
  expect_self_contained_and_well_formed(html);
  EXPECT_NE(html.find("style=\"min-width:"), std::string::npos);
  EXPECT_NE(html.find("stroke-dasharray=\"8 4\""), std::string::npos);  // policies past ten are dashed
  EXPECT_NE(html.find("fill=\"url(#bar-stripes)\""), std::string::npos);  // and their bars striped
  EXPECT_EQ(count(html, "id=\"bar-stripes\""), 1u);
}

TEST(report, write_html_report_writes_the_page) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "phasealloc_report_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "report.html";
  const report_input in = report_testing::make_synthetic_report(small());
  const auto written = write_html_report(file, in);
  ASSERT_TRUE(written.has_value()) << written.error();
  std::ifstream f(file, std::ios::binary);
  const std::string content{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  EXPECT_EQ(content, render_html_report(in));
  std::filesystem::remove_all(dir);
}

TEST(report, write_html_report_names_the_path_on_failure) {
  const std::filesystem::path file = "/nonexistent-phasealloc-dir/sub/report.html";
  const auto written = write_html_report(file, report_input{});
  ASSERT_FALSE(written.has_value());
  EXPECT_NE(written.error().find(file.string()), std::string::npos);
}

}  // namespace
}  // namespace phasealloc

namespace phasealloc {
namespace {

TEST(report, colocation_headroom_lists_phases_and_transitions) {
  report_input in = report_testing::make_synthetic_report(small());
  colocation_headroom& h = in.results[0].headroom;
  h.phases.push_back(phase_residency{"generation", 2, 1000, 3 * gib, 1.5 * static_cast<double>(gib)});
  h.transitions.push_back(transition_return{10, 100, "training", "generation", 5 * gib, 4 * gib});
  h.transitions.push_back(transition_return{20, 200, "training", "generation", 7 * gib, 4 * gib});
  const std::string html = render_html_report(in);
  const std::size_t section = html.find("Colocation headroom</h2>");
  ASSERT_NE(section, std::string::npos);
  const std::string body = html.substr(section);
  EXPECT_NE(body.find("time-weighted mean"), std::string::npos);
  EXPECT_NE(body.find(">1.50 GiB<"), std::string::npos);  // the mean
  EXPECT_NE(body.find(">3.00 GiB<"), std::string::npos);  // the peak, and the largest return
  EXPECT_NE(body.find(">2.00 GiB<"), std::string::npos);  // returned, mean of 1 and 3 GiB
  EXPECT_NE(body.find("training \u2192 generation"), std::string::npos);
}

TEST(report, colocation_headroom_without_phases_says_so) {
  const report_input in = report_testing::make_synthetic_report(small());
  const std::string html = render_html_report(in);
  const std::size_t section = html.find("Colocation headroom</h2>");
  ASSERT_NE(section, std::string::npos);
  EXPECT_NE(html.find("No phase statistics", section), std::string::npos);
}

}  // namespace
}  // namespace phasealloc
