#include "phasealloc/export/placed_replay.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "phasealloc/export/placed_segments.hpp"
#include "phasealloc/export/torch_trace_recorder.hpp"

namespace phasealloc {

result<placed_replay, std::string> replay_placed(const trace& t, std::string_view policy_spec,
                                                 replay_options options) {
  placed_replay out;
  out.layout.allocator_settings = t.meta.allocator_settings;
  std::uint64_t clock_ns = 0;
  torch_trace_recorder recorder(out.layout.entries, options.capacity_bytes, &clock_ns);
  snapshot final_state;
  options.observer = &recorder;
  options.final_state = &final_state;
  options.clock_ns = &clock_ns;
  auto replayed = replay(t, policy_spec, options);
  if (!replayed) return fmt::format("policy \"{}\": {}", policy_spec, replayed.error());
  if (recorder.failed()) return std::string("out of host memory while recording the replay's events");
  out.result = std::move(replayed).value();
  out.layout.segments = placed_segments(final_state);

  std::size_t segment_bytes = 0;
  for (const placed_segment& seg : out.layout.segments) {
    for (const placed_block& b : seg.blocks) segment_bytes += b.size;
  }
  const std::size_t reserved = out.result.final_reserved_bytes;
  if (segment_bytes != reserved || recorder.reserved_bytes() != reserved) {
    return fmt::format(
        "policy \"{}\": the exported layout does not add up (segments {} B, segment events {} B, replay reserved {} "
        "B at the end)",
        policy_spec, segment_bytes, recorder.reserved_bytes(), reserved);
  }
  return out;
}

}  // namespace phasealloc
