// The HTML report of `phasealloc report`: one trace, several allocator policies, one page.
//
// Design note
// Rationale: a replay comparison is read by people deciding which policy to ship, often on a
//   machine without network access, and is passed around as an attachment. So the report is one
//   self-contained HTML file: inline SVG charts and a small inline <style>, system fonts, no
//   script, no external URL (only the SVG namespace string). It opens the same way anywhere.
// Approach: the page is assembled from independent pieces, one file each under src/: html_escape
//   (every piece of text goes through it: policy specs and phase names are user text),
//   svg_timeline (reserved per policy, allocated, the floor, phase bands, byte axes),
//   svg_phase_bars (peak reserved per phase and policy, fragmentation as labels), html_tables (the
//   results and per-phase tables), and report.cpp (head, summary, OOM warnings, section order);
//   helpers: axis_ticks (byte / time / count ticks), palette, html_legend, measures (the lowest
//   peak), report_format (numbers), page_style (the CSS). A policy keeps one colour in every chart
//   and table (past ten colours: dashed lines, striped bars); a phase keeps one colour
//   (generation, inference, training, optimizer; other names get one from a spare palette).
// Measures: fragmentation = 1 - peak allocated / peak reserved; the floor for
//   peak reserved is peak live bytes; "reserved - floor" is what a policy holds above it.
// Per rank (a multi-GPU job, `phasealloc dryrun --gpus N`): one page, a table of every rank's
//   device total per policy (the allocator's peak reserved plus NCCL's buffers, which no allocator
//   traces), then a rank selector that shows one rank's whole report at a time. The selector is
//   radio buttons and CSS (:checked), so the page still has no script; each rank's element ids get
//   the rank's prefix, so the ids stay unique.
// Limitations: the timeline draws the replay's samples (maxima over windows of events), thinned
//   again by maximum to about 2,000 points, so a peak is never lost but short dips may be; the
//   allocated area is the first policy's (allocated is policy-independent up to rounding; another
//   policy's allocated is drawn dashed only where it differs, e.g. after out-of-memory failures).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "phasealloc/replay/replay.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc {

struct report_input {
  std::string trace_name;
  std::uint64_t floor_bytes = 0;      ///< Peak live bytes of the trace: no allocator can reserve less.
  std::size_t capacity_bytes = 0;     ///< The simulated device's capacity (0 = unknown).
  std::vector<replay_result> results; ///< One per policy, in the order the user named them.
  std::string generated_by;           ///< The command line that produced the report.
};

/// One rank of a multi-GPU job, for the per-rank page.
struct rank_report_input {
  std::string label;                     ///< "rank 0 (GPU 0)"
  std::optional<std::size_t> nccl_bytes; ///< NCCL's device memory outside the allocator (nullopt: unknown)
  report_input report;                   ///< Its replays (capacity: the GPU less NCCL's buffers).
};

/// The whole page, UTF-8. Never fails: missing data (no events, no phases, no results) is said
/// on the page instead of drawn.
std::string render_html_report(const report_input& input);

/// Renders and writes `path` (replacing it). The error names the path and what went wrong.
result<std::monostate, std::string> write_html_report(const std::filesystem::path& path,
                                                      const report_input& input);

/// One page for every rank: the per-rank table of device totals, then the rank selector over each
/// rank's report. `gpu_bytes`: the GPU's whole memory.
std::string render_rank_report(const std::vector<rank_report_input>& ranks, std::size_t gpu_bytes,
                               const std::string& generated_by);
result<std::monostate, std::string> write_rank_report(const std::filesystem::path& path,
                                                      const std::vector<rank_report_input>& ranks,
                                                      std::size_t gpu_bytes, const std::string& generated_by);

}  // namespace phasealloc
