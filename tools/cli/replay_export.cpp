#include "replay_export.hpp"

#include "commands.hpp"

namespace phasealloc::cli {
namespace {

class layout_recorder final : public trace_sink {
 public:
  explicit layout_recorder(std::vector<placed_trace_entry>& out) : out_(out) {}
  void on_event(const trace_record& r) noexcept override {
    const char* action = nullptr;
    bool block = false;
    switch (r.op) {
      case trace_op::alloc: action = "alloc"; block = true; break;
      case trace_op::free_requested: action = "free_requested"; block = true; break;
      case trace_op::free_completed: action = "free_completed"; block = true; break;
      case trace_op::segment_alloc: action = "segment_alloc"; break;
      case trace_op::segment_free: action = "segment_free"; break;
      case trace_op::segment_map: action = "segment_map"; break;
      case trace_op::segment_unmap: action = "segment_unmap"; break;
      case trace_op::oom: action = "oom"; block = true; break;
      default: return;
    }
    try {
      const std::uint64_t size = block && r.requested_bytes != 0 ? r.requested_bytes : r.block_bytes;
      out_.push_back({action, r.op == trace_op::oom ? 0 : r.addr, size, r.stream, out_.size()});
    } catch (...) {
      failed_ = true;  // out of host memory: reported after the replay
    }
  }
  bool failed() const { return failed_; }

 private:
  std::vector<placed_trace_entry>& out_;
  bool failed_ = false;
};

const char* torch_state(block_state s) {
  switch (s) {
    case block_state::allocated: return "active_allocated";
    case block_state::pending_free: return "active_pending_free";
    default: return "inactive";
  }
}

}  // namespace

placed_snapshot replay_layout(const trace& t, const std::string& policy_spec, const replay_options& options,
                              replay_result& result) {
  placed_snapshot out;
  out.allocator_settings = t.meta.allocator_settings;
  layout_recorder recorder(out.entries);
  snapshot final_state;
  replay_options with_observer = options;
  with_observer.observer = &recorder;
  with_observer.final_state = &final_state;
  auto replayed = replay(t, policy_spec, with_observer);
  if (!replayed) throw command_error(replayed.error());
  if (recorder.failed()) throw command_error("export: out of host memory while recording the replay's events");
  result = std::move(replayed).value();
  for (const snapshot_segment& seg : final_state.segments) {
    placed_segment current;
    bool open = false;
    for (const snapshot_block& b : seg.blocks) {
      if (b.state == block_state::unmapped) {  // a hole in a reservation: the mapped run ends here
        if (open) out.segments.push_back(std::move(current));
        current = placed_segment{};
        open = false;
        continue;
      }
      if (!open) {
        current = placed_segment{b.addr, seg.stream, seg.small, seg.expandable, {}};
        open = true;
      }
      const bool active = b.state == block_state::allocated || b.state == block_state::pending_free;
      current.blocks.push_back({b.addr, b.bytes, active ? b.requested_bytes : 0, torch_state(b.state)});
    }
    if (open) out.segments.push_back(std::move(current));
  }
  return out;
}

}  // namespace phasealloc::cli
