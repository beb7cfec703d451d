#include "phasealloc/replay/peak_explain.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "phasealloc/check.hpp"
#include "phasealloc/oom_report.hpp"

namespace phasealloc {
namespace {

/// One page of a segment: whether it is mapped, its live bytes and how many live blocks touch it.
struct page_state {
  bool mapped = false;
  std::size_t live_bytes = 0;
  std::size_t live_blocks = 0;
};

pool_peak_part& part_of(std::vector<pool_peak_part>& parts, const std::string& pool) {
  const auto it = std::find_if(parts.begin(), parts.end(), [&](const pool_peak_part& p) { return p.pool == pool; });
  if (it != parts.end()) return *it;
  parts.push_back(pool_peak_part{.pool = pool});
  return parts.back();
}

/// The pages of one segment (a partial last page counts as a page of its own size).
std::vector<page_state> pages_of(const snapshot_segment& s, std::size_t page_bytes) {
  std::vector<page_state> pages((s.bytes + page_bytes - 1) / page_bytes);
  for (const snapshot_block& b : s.blocks) {
    if (b.bytes == 0) continue;
    const std::size_t begin = b.addr - s.addr;
    const std::size_t end = begin + b.bytes;
    const bool live = b.state == block_state::allocated || b.state == block_state::pending_free;
    for (std::size_t p = begin / page_bytes; p * page_bytes < end; ++p) {
      const std::size_t lo = std::max(begin, p * page_bytes);
      const std::size_t hi = std::min(end, (p + 1) * page_bytes);
      if (b.state != block_state::unmapped) pages[p].mapped = true;
      if (live) {
        pages[p].live_bytes += hi - lo;
        ++pages[p].live_blocks;
      }
    }
  }
  return pages;
}

}  // namespace

std::vector<pool_peak_part> explain_layout(const snapshot& layout, std::size_t page_bytes) {
  PHASEALLOC_CHECK(page_bytes > 0, "explain_layout: pages of 0 bytes");
  std::vector<pool_peak_part> parts;
  for (const snapshot_segment& s : layout.segments) {
    pool_peak_part& part = part_of(parts, s.pool);
    part.mapped_bytes += s.mapped_bytes;
    part.allocated_bytes += s.active_bytes;
    const std::vector<page_state> pages = pages_of(s, page_bytes);
    const auto page_size = [&](std::size_t p) { return std::min(page_bytes, s.bytes - p * page_bytes); };
    for (std::size_t p = 0; p < pages.size();) {
      if (!pages[p].mapped) {
        ++p;
        continue;
      }
      if (pages[p].live_bytes > 0) {
        if (pages[p].live_bytes < page_size(p)) {
          part.live_page_free_bytes += page_size(p) - pages[p].live_bytes;
          ++part.live_pages;
          if (pages[p].live_blocks == 1) ++part.live_pages_one_block;
        }
        ++p;
        continue;
      }
      // A run of empty mapped pages: a hole when live pages bound it on both sides.
      std::size_t q = p;
      std::size_t run_bytes = 0;
      while (q < pages.size() && pages[q].mapped && pages[q].live_bytes == 0) run_bytes += page_size(q++);
      const bool live_before = p > 0 && pages[p - 1].mapped;
      const bool live_after = q < pages.size() && pages[q].mapped;
      if (live_before && live_after) {
        part.hole_bytes += run_bytes;
        ++part.holes;
        part.largest_hole_bytes = std::max(part.largest_hole_bytes, run_bytes);
        if (q - p <= 4) part.small_hole_bytes += run_bytes;
      } else {
        part.edge_bytes += run_bytes;
        ++part.edges;
      }
      p = q;
    }
  }
  return parts;
}

namespace {

result<layout_moment, std::string> moment_after(const trace& t, std::string_view policy_spec, const replay_options& options,
                                               const replay_result& first, std::size_t event) {
  snapshot layout;
  replay_options again = options;
  again.snapshot_after_event = event;
  again.event_state = &layout;
  auto run = replay(t, policy_spec, again);
  if (!run) return run.error();
  PHASEALLOC_CHECK(run.value().peak_reserved_bytes == first.peak_reserved_bytes,
                   "explain_peak: two replays of one trace reached different peaks ({} and {} bytes)",
                   first.peak_reserved_bytes, run.value().peak_reserved_bytes);  // replays are deterministic
  layout_moment m;
  m.event = event;
  for (const phase_band& b : first.bands) {
    if (b.first_event <= event && event < b.end_event) m.phase = b.name;
  }
  m.pools = explain_layout(layout, options.granularity_bytes);
  for (const pool_peak_part& p : m.pools) {
    m.reserved_bytes += p.mapped_bytes;
    m.allocated_bytes += p.allocated_bytes;
  }
  return m;
}

}  // namespace

result<peak_explanation, std::string> explain_peak(const trace& t, std::string_view policy_spec,
                                                   const replay_options& options) {
  replay_options first = options;
  first.snapshot_after_event.reset();
  first.event_state = nullptr;
  first.progress = nullptr;
  auto run = replay(t, policy_spec, first);
  if (!run) return run.error();
  const replay_result& r = run.value();
  peak_explanation e;
  e.policy = r.policy;
  e.page_bytes = options.granularity_bytes;
  e.peak_reserved_bytes = r.peak_reserved_bytes;
  e.peak_allocated_bytes = r.peak_allocated_bytes;
  auto at_reserved = moment_after(t, policy_spec, first, r, r.peak_reserved_event);
  if (!at_reserved) return at_reserved.error();
  e.at_peak_reserved = std::move(at_reserved).value();
  auto at_allocated = moment_after(t, policy_spec, first, r, r.peak_allocated_event);
  if (!at_allocated) return at_allocated.error();
  e.at_peak_allocated = std::move(at_allocated).value();
  return e;
}

namespace {

std::string render_moment(std::string_view what, const layout_moment& m) {
  std::string out = fmt::format("  at the {} (after event {}, phase {}): reserved {}, allocated {}, free {}\n", what,
                                m.event, m.phase.empty() ? "-" : m.phase, format_bytes(m.reserved_bytes),
                                format_bytes(m.allocated_bytes), format_bytes(m.reserved_bytes - m.allocated_bytes));
  for (const pool_peak_part& p : m.pools) {
    if (p.mapped_bytes == 0) continue;
    out += fmt::format(
        "    {:<8} mapped {:>10}, free {:>10}: in live pages {:>10} ({} pages, {} held by one block); holes {:>10} "
        "({} runs, largest {}, {} in runs of <= 4 pages); edges {:>10} ({} runs)\n",
        p.pool, format_bytes(p.mapped_bytes), format_bytes(p.free_bytes()), format_bytes(p.live_page_free_bytes),
        p.live_pages, p.live_pages_one_block, format_bytes(p.hole_bytes), p.holes, format_bytes(p.largest_hole_bytes),
        format_bytes(p.small_hole_bytes), format_bytes(p.edge_bytes), p.edges);
  }
  return out;
}

}  // namespace

std::string render_peak_explanation(const peak_explanation& e) {
  std::string out = fmt::format("{}: peak reserved {}, peak allocated {}, waste {} (pages of {})\n", e.policy,
                                format_bytes(e.peak_reserved_bytes), format_bytes(e.peak_allocated_bytes),
                                format_bytes(e.peak_reserved_bytes - std::min(e.peak_reserved_bytes, e.peak_allocated_bytes)),
                                format_bytes(e.page_bytes));
  out += render_moment("peak reserved", e.at_peak_reserved);
  out += render_moment("peak allocated", e.at_peak_allocated);
  return out;
}

}  // namespace phasealloc
