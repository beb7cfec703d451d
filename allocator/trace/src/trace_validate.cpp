#include "phasealloc/trace/trace_validate.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "phasealloc/trace/flat_id_map.hpp"
#include "phasealloc/trace/id_history.hpp"

namespace phasealloc {
namespace {

struct lifetime {
  std::uint64_t bytes = 0;
  std::size_t born_at = 0;
};

// Tracks one id namespace (allocations or segments): the live ids with their sizes and births,
// and every id ever created. A freed id is forgotten but for its creation: the event numbers an
// error names about a freed id (its birth, its free) are found again by scanning the events
// before the failing one, which only happens once, on the way out.
class id_book {
 public:
  id_book(std::string_view noun, const std::vector<trace_event>& events, trace_event_op create_op,
          trace_event_op destroy_op)
      : noun_(noun), events_(events), create_op_(create_op), destroy_op_(destroy_op) {}

  // Each check returns whether it passed and words the problem into `problem` only when it did
  // not: a passing event builds no string (the words are in the cold functions below).

  bool create(std::uint64_t id, std::uint64_t bytes, std::size_t index, std::string& problem) {
    if (!created_.insert(id)) [[unlikely]] {
      problem = already_allocated(id, index);
      return false;
    }
    live_.try_emplace(id, lifetime{bytes, index});
    return true;
  }

  /// Whether `id` is live at event `index`; else why not, in `problem`.
  bool check_live(std::uint64_t id, std::size_t index, std::string& problem) const {
    if (live_.contains(id)) [[likely]] {
      return true;
    }
    problem = not_live(id, index);
    return false;
  }

  /// The bytes of a live id (0 when not live).
  std::uint64_t live_bytes(std::uint64_t id) const {
    const lifetime* life = live_.find(id);
    return life == nullptr ? 0 : life->bytes;
  }

  bool destroy(std::uint64_t id, std::uint64_t bytes, std::size_t index, std::string& problem) {
    const lifetime* life = live_.find(id);
    if (life == nullptr) [[unlikely]] {
      problem = not_live(id, index);
      return false;
    }
    if (life->bytes != bytes) [[unlikely]] {
      problem = size_mismatch(id, *life, bytes);
      return false;
    }
    live_.erase(id);
    return true;
  }

 private:
  [[gnu::cold]] std::string already_allocated(std::uint64_t id, std::size_t index) const {
    const lifetime* life = live_.find(id);
    return fmt::format("{} id {} was already allocated at event {}", noun_, id,
                       life != nullptr ? life->born_at : first_event(create_op_, id, index));
  }

  [[gnu::cold]] std::string not_live(std::uint64_t id, std::size_t index) const {
    if (!created_.contains(id)) {
      return fmt::format("{} id {} is not live (never allocated)", noun_, id);
    }
    return fmt::format("{} id {} is not live (freed at event {})", noun_, id, first_event(destroy_op_, id, index));
  }

  [[gnu::cold]] std::string size_mismatch(std::uint64_t id, const lifetime& life, std::uint64_t bytes) const {
    return fmt::format("{} id {} was allocated with {} bytes at event {} but freed with {} bytes", noun_, id,
                       life.bytes, life.born_at, bytes);
  }

  // The first event before `end` that is `op` on `id`. Every event before `end` passed, so an id
  // was created once and freed at most once: the first such event is the one.
  std::size_t first_event(trace_event_op op, std::uint64_t id, std::size_t end) const {
    for (std::size_t j = 0; j < end; ++j) {
      if (events_[j].op == op && events_[j].alloc_id == id) {
        return j;
      }
    }
    return end;  // not reached: the id was created (and freed) before `end`
  }

  std::string_view noun_;
  const std::vector<trace_event>& events_;
  trace_event_op create_op_;
  trace_event_op destroy_op_;
  flat_id_map<lifetime> live_;
  id_history created_;
};

}  // namespace

std::string trace_validation_error::message() const {
  return fmt::format("event {} ({}): {}", event_index, to_string(op), problem);
}

namespace {

// validate(); and when `summary` is given, every event that passes is added to it.
result<std::monostate, trace_validation_error> check_trace(const trace& t, trace_summary_builder* summary) {
  if (t.version == 0 || t.version > trace_format_version) {
    return trace_validation_error{t.events.size(), trace_event_op::alloc,
                                  fmt::format("trace version {} is not one this build reads (1..{})", t.version,
                                              trace_format_version)};
  }
  id_book allocs("allocation", t.events, trace_event_op::alloc, trace_event_op::free);
  id_book segments("segment", t.events, trace_event_op::segment_alloc, trace_event_op::segment_free);
  std::uint64_t last_time_ns = 0;
  bool seen_unseeded = false;
  // The seeded segment whose seed_block events are being read (its event index), and what they cover.
  struct open_segment {
    std::size_t index = 0;
    std::uint64_t bytes = 0;
    bool expandable = false;
    std::uint64_t mapped_bytes = 0;
    std::size_t blocks = 0;
  };
  std::optional<open_segment> layout;
  flat_id_map<std::size_t> placed;  // allocation id -> its seed_block
  // Closes the open layout segment: its blocks must cover its mapped bytes exactly.
  const auto close_layout = [&](std::size_t at, trace_event_op op) -> std::optional<trace_validation_error> {
    if (layout && layout->blocks > 0 && layout->mapped_bytes != layout->bytes) {
      return trace_validation_error{
          at, op,
          fmt::format("the seed_block events of the seeded segment at event {} cover {} mapped bytes of its {}",
                      layout->index, layout->mapped_bytes, layout->bytes)};
    }
    layout.reset();
    return std::nullopt;
  };

  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    auto fail = [&](std::string problem) { return trace_validation_error{i, e.op, std::move(problem)}; };

    if (static_cast<std::size_t>(e.op) >= trace_event_op_count) {
      return fail(fmt::format("op value {} is not a known op", static_cast<unsigned>(e.op)));
    }
    if (e.time_ns < last_time_ns) {
      return fail(fmt::format("time goes backwards ({} ns after {} ns)", e.time_ns, last_time_ns));
    }
    last_time_ns = e.time_ns;
    if ((e.flags & ~trace_flag::all) != 0) {
      return fail(fmt::format("unknown flag bits {:#x}", e.flags));
    }
    const bool seeded = (e.flags & trace_flag::seeded) != 0;
    if (e.op != trace_event_op::seed_block) {
      if (auto closed = close_layout(i, e.op)) {
        return *closed;
      }
    }
    if ((e.flags & (trace_flag::small_pool | trace_flag::expandable)) != 0 &&
        !(seeded && e.op == trace_event_op::segment_alloc)) {
      return fail("only a seeded segment_alloc may be flagged small_pool or expandable");
    }
    if ((e.flags & (trace_flag::allocated | trace_flag::unmapped)) != 0 && e.op != trace_event_op::seed_block) {
      return fail("only a seed_block may be flagged allocated or unmapped");
    }
    if (seeded) {
      if (e.op != trace_event_op::alloc && e.op != trace_event_op::segment_alloc &&
          e.op != trace_event_op::seed_block) {
        return fail("only alloc, segment_alloc and seed_block may be seeded");
      }
      if (seen_unseeded) {
        return fail("a seeded event follows an unseeded one (seeded events come first)");
      }
    } else {
      seen_unseeded = true;
    }
    if (e.stream >= t.meta.stream_count) {
      return fail(fmt::format("stream ordinal {} is not below the stream count {}", e.stream, t.meta.stream_count));
    }

    const bool sized = e.op == trace_event_op::alloc || e.op == trace_event_op::segment_alloc;
    if (sized && e.bytes > trace_max_event_bytes) {
      return fail(fmt::format("{} bytes is above the largest size a trace may hold, 1 PiB ({} bytes)", e.bytes,
                              trace_max_event_bytes));
    }

    std::string problem;
    switch (e.op) {
      case trace_event_op::alloc: allocs.create(e.alloc_id, e.bytes, i, problem); break;
      case trace_event_op::free: allocs.destroy(e.alloc_id, e.bytes, i, problem); break;
      case trace_event_op::record_stream: allocs.check_live(e.alloc_id, i, problem); break;
      case trace_event_op::offload:
      case trace_event_op::restore:
        if (t.version < trace_format_version_offload) {
          problem = fmt::format("{} needs trace version {} (this trace is version {})", to_string(e.op),
                                trace_format_version_offload, t.version);
        } else {
          allocs.check_live(e.alloc_id, i, problem);
        }
        break;
      case trace_event_op::segment_alloc:
        segments.create(e.alloc_id, e.bytes, i, problem);
        if (seeded) {
          layout = open_segment{i, e.bytes, (e.flags & trace_flag::expandable) != 0, 0, 0};
        }
        break;
      case trace_event_op::seed_block: {
        const bool allocated = (e.flags & trace_flag::allocated) != 0;
        const bool unmapped = (e.flags & trace_flag::unmapped) != 0;
        if (t.version < trace_format_version_layout) {
          problem = fmt::format("seed_block needs trace version {} (this trace is version {})",
                                trace_format_version_layout, t.version);
        } else if (!seeded || !layout) {
          problem = "a seed_block must be seeded and follow a seeded segment_alloc or another seed_block";
        } else if (e.bytes == 0 || e.bytes > trace_max_event_bytes) {
          problem = fmt::format("a block of {} bytes (it must hold 1 byte to 1 PiB)", e.bytes);
        } else if (allocated && unmapped) {
          problem = "a block cannot be both allocated and unmapped";
        } else if (unmapped && !layout->expandable) {
          problem = fmt::format("an unmapped block in the seeded segment at event {}, which is not expandable",
                                layout->index);
        } else if (allocated) {
          const std::uint64_t requested = allocs.live_bytes(e.alloc_id);
          if (allocs.check_live(e.alloc_id, i, problem)) {
            if (const auto [at, fresh] = placed.try_emplace(e.alloc_id, i); !fresh) {
              problem = fmt::format("allocation id {} is already placed by the seed_block at event {}", e.alloc_id,
                                    *at);
            } else if (e.bytes < requested) {
              problem = fmt::format("a block of {} bytes holds allocation id {} of {} bytes", e.bytes, e.alloc_id,
                                    requested);
            }
          }
        }
        if (problem.empty() && layout) {
          ++layout->blocks;
          layout->mapped_bytes += unmapped ? 0 : e.bytes;
          if (layout->mapped_bytes > layout->bytes) {
            problem = fmt::format("the blocks of the seeded segment at event {} exceed its {} mapped bytes",
                                  layout->index, layout->bytes);
          }
        }
        break;
      }
      case trace_event_op::segment_free: segments.destroy(e.alloc_id, e.bytes, i, problem); break;
      case trace_event_op::phase:
        if (e.name >= t.strings.size()) {
          problem = fmt::format("phase name index {} is out of range (the string table has {})", e.name,
                                t.strings.size());
        }
        break;
      case trace_event_op::empty_cache:
      case trace_event_op::segment_map:
      case trace_event_op::segment_unmap:
      case trace_event_op::oom: break;
    }
    if (!problem.empty()) {
      return fail(std::move(problem));
    }
    if (summary != nullptr) {
      // Valid so far: an alloc's id is new and a free's is live with the same bytes.
      summary->add(e, e.op == trace_event_op::alloc ? e.bytes : 0, e.op == trace_event_op::free ? e.bytes : 0);
    }
  }
  if (auto closed = close_layout(t.events.size(), trace_event_op::seed_block)) {
    return *closed;
  }
  return std::monostate{};
}

}  // namespace

result<std::monostate, trace_validation_error> validate(const trace& t) { return check_trace(t, nullptr); }

result<trace_summary, trace_validation_error> validate_and_summarize(const trace& t) {
  trace_summary_builder summary;
  if (auto checked = check_trace(t, &summary); !checked) {
    return checked.error();
  }
  return summary.finish();
}

}  // namespace phasealloc
