#include "page_style.hpp"

namespace phasealloc::report_detail {

// Presentation attributes (fill="...") lose to CSS, so rules here never set `fill` on text that
// carries its own colour (band and phase labels).
std::string_view page_style() {
  return R"css(
:root { color-scheme: light; --fg: #1f2328; --muted: #59636e; --border: #d0d7de; --panel: #f6f8fa; --oom: #b91c1c; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--panel); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", "Liberation Sans",
  Arial, sans-serif; }
main { max-width: 1300px; margin: 0 auto; padding: 22px 28px 36px; }
h1 { font-size: 22px; font-weight: 650; margin: 0 0 6px; overflow-wrap: anywhere; }
h2 { font-size: 16px; font-weight: 650; margin: 0 0 10px; }
.summary { margin: 2px 0; color: var(--muted); }
.summary strong { color: var(--fg); font-weight: 600; }
section { background: #fff; border: 1px solid var(--border); border-radius: 8px; padding: 16px 20px; margin-top: 16px; }
.scroll { overflow-x: auto; }
figure.chart { margin: 0; }
figcaption, .notes { color: var(--muted); font-size: 12.5px; margin-top: 6px; }
.notes { padding-left: 18px; margin-bottom: 0; }
.warn { background: #fff5f5; border: 1px solid #f5b5b5; color: #8a1c1c; border-radius: 6px; padding: 8px 12px; margin: 12px 0 0; }
.empty { color: var(--muted); font-style: italic; margin: 4px 0; }
.legend { list-style: none; display: flex; flex-wrap: wrap; gap: 6px 20px; padding: 0; margin: 0 0 8px; }
.legend li { display: flex; align-items: center; gap: 6px; }
.legend.phases { margin: 6px 0 0; }
.legend-title { color: var(--muted); font-weight: 600; }
.legend-label { overflow-wrap: anywhere; }
.swatch { flex: none; vertical-align: middle; }
.badge { display: inline-block; font-size: 11px; font-weight: 600; line-height: 16px; padding: 0 6px; border-radius: 9px;
  margin-left: 6px; white-space: nowrap; }
.badge.oom { background: #fde8e8; color: var(--oom); border: 1px solid #f5b5b5; }
.badge.best { background: #e6f4ea; color: #1a7f37; border: 1px solid #a7d8b5; }
.chart-svg { display: block; width: 100%; height: auto; font-size: 12px; }
.chart-svg .grid line { stroke: #e7eaee; stroke-width: 1; }
.chart-svg .axis { fill: none; stroke: #8c959f; stroke-width: 1; }
.chart-svg .tick { stroke: #8c959f; }
.chart-svg .ticks text { fill: #4b535c; }
.chart-svg .axis-title { fill: #59636e; }
.chart-svg .halo { paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
.chart-svg .band-label { font-weight: 600; }
.chart-svg .reserved { fill: none; stroke-width: 2; stroke-linejoin: round; }
.chart-svg .allocated-area { fill: #6b7785; fill-opacity: 0.22; stroke: #6b7785; stroke-opacity: 0.7; stroke-width: 1; }
.chart-svg .allocated-line { fill: none; stroke-width: 1.5; stroke-dasharray: 4 3; }
.chart-svg .peak { stroke: #fff; stroke-width: 1.5; }
.chart-svg .floor text, .chart-svg .capacity text { font-weight: 600; }
.chart-svg .bar-label { fill: #3d444d; font-size: 11.5px; }
.chart-svg .bar-label.oom { fill: var(--oom); font-weight: 700; }
.chart-svg .bar-label.muted { fill: #8c959f; }
.chart-svg .group-label { font-size: 13px; font-weight: 650; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 6px 9px; border-bottom: 1px solid #eaeef2; text-align: left; vertical-align: top; white-space: nowrap; }
thead th { background: var(--panel); font-weight: 600; border-bottom: 1px solid var(--border); white-space: normal;
  vertical-align: bottom; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.strong { font-weight: 600; }
.sub { color: var(--muted); font-size: 11.5px; font-weight: 400; }
.sub.block { display: block; }
.policy-cell { white-space: normal; min-width: 19em; max-width: 30em; }
.policy { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 50%; margin-right: 7px; vertical-align: middle; }
tr.best td { background: #f3fbf5; }
tr.oom td { background: #fff5f5; }
.oom-count { color: var(--oom); font-weight: 700; }
tr.group-start > * { border-top: 2px solid var(--border); }
.phase-cell { font-weight: 600; vertical-align: top; background: #fff; }
footer { color: var(--muted); font-size: 12px; margin-top: 16px; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12px;
  background: #eaeef2; padding: 1px 5px; border-radius: 4px; overflow-wrap: anywhere; }
)css";
}

}  // namespace phasealloc::report_detail
