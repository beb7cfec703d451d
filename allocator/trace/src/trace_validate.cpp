#include "phasealloc/trace/trace_validate.hpp"

#include <fmt/format.h>

#include <unordered_map>

namespace phasealloc {
namespace {

struct lifetime {
  std::uint64_t bytes = 0;
  std::size_t born_at = 0;
  std::size_t died_at = 0;  // 0 while live (an event index > born_at otherwise)
  bool live = true;
};

// Tracks one id namespace (allocations or segments).
class id_book {
 public:
  explicit id_book(std::string_view noun) : noun_(noun) {}

  std::string create(std::uint64_t id, std::uint64_t bytes, std::size_t index) {
    auto [it, inserted] = ids_.try_emplace(id, lifetime{bytes, index, 0, true});
    if (!inserted) {
      return fmt::format("{} id {} was already allocated at event {}", noun_, id, it->second.born_at);
    }
    return {};
  }

  std::string check_live(std::uint64_t id) const {
    const auto it = ids_.find(id);
    if (it == ids_.end()) {
      return fmt::format("{} id {} is not live (never allocated)", noun_, id);
    }
    if (!it->second.live) {
      return fmt::format("{} id {} is not live (freed at event {})", noun_, id, it->second.died_at);
    }
    return {};
  }

  std::string destroy(std::uint64_t id, std::uint64_t bytes, std::size_t index) {
    if (auto problem = check_live(id); !problem.empty()) {
      return problem;
    }
    auto& life = ids_.find(id)->second;
    if (life.bytes != bytes) {
      return fmt::format("{} id {} was allocated with {} bytes at event {} but freed with {} bytes", noun_, id,
                         life.bytes, life.born_at, bytes);
    }
    life.live = false;
    life.died_at = index;
    return {};
  }

 private:
  std::string_view noun_;
  std::unordered_map<std::uint64_t, lifetime> ids_;
};

}  // namespace

std::string trace_validation_error::message() const {
  return fmt::format("event {} ({}): {}", event_index, to_string(op), problem);
}

result<std::monostate, trace_validation_error> validate(const trace& t) {
  if (t.version == 0 || t.version > trace_format_version) {
    return trace_validation_error{t.events.size(), trace_event_op::alloc,
                                  fmt::format("trace version {} is not one this build reads (1..{})", t.version,
                                              trace_format_version)};
  }
  id_book allocs("allocation");
  id_book segments("segment");
  std::uint64_t last_time_ns = 0;
  bool seen_unseeded = false;

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
    if (seeded) {
      if (e.op != trace_event_op::alloc && e.op != trace_event_op::segment_alloc) {
        return fail("only alloc and segment_alloc may be seeded");
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
      case trace_event_op::alloc: problem = allocs.create(e.alloc_id, e.bytes, i); break;
      case trace_event_op::free: problem = allocs.destroy(e.alloc_id, e.bytes, i); break;
      case trace_event_op::record_stream: problem = allocs.check_live(e.alloc_id); break;
      case trace_event_op::segment_alloc: problem = segments.create(e.alloc_id, e.bytes, i); break;
      case trace_event_op::segment_free: problem = segments.destroy(e.alloc_id, e.bytes, i); break;
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
  }
  return std::monostate{};
}

}  // namespace phasealloc
