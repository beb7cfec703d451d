#include "trace_control.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "phasealloc/trace/trace_file.hpp"
#include "phasealloc/trace/trace_path.hpp"
#include "interpose_config.hpp"
#include "process_title.hpp"
#include "phasealloc/trace/trace_recorder.hpp"

namespace phasealloc::interpose {

std::string trace_path_for(std::string_view pattern, int ordinal, std::string_view role) {
  std::string with_device;
  bool named_device = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      if (pattern[i + 1] == 'd') {
        with_device += std::to_string(ordinal);
        named_device = true;
        ++i;
        continue;
      }
      if (pattern[i + 1] == 'R') {
        with_device += role;
        ++i;
        continue;
      }
      if (pattern[i + 1] == '%') {  // keep "%%" for expand_trace_path
        with_device += "%%";
        ++i;
        continue;
      }
    }
    with_device += pattern[i];
  }
  std::string path = expand_trace_path(with_device);
  if (named_device || ordinal == 0) return path;
  const std::filesystem::path p(path);
  std::filesystem::path renamed = p.parent_path() / fmt::format("{}.dev{}{}", p.stem().string(), ordinal,
                                                                p.extension().string());
  return renamed.string();
}

void attach_trace(device_slot& slot, std::string_view pattern, std::string_view settings) {
  trace_recorder_options options;
  options.source = fmt::format("phasealloc interpose, device {} ({})", slot.ordinal, slot.dev->name());
  options.allocator_settings = std::string(settings);
  options.device_capacity_bytes = slot.dev->caps().capacity_bytes;
  options.reserve_events = 1 << 16;
  auto recorder = std::make_unique<trace_recorder>(options);
  const std::string phase = slot.eng->current_phase();
  if (phase != "unphased") {
    trace_record r;
    r.op = trace_op::phase_begin;
    r.name = phase;
    recorder->on_event(r);
  }
  const auto& config = process_config();
  std::string role = config ? config.value().role : std::string();
  if (role.empty()) role = process_title_role();  // a Ray actor's or vLLM process's name
  slot.trace_path = trace_path_for(pattern, slot.ordinal, role);
  slot.recorder = std::move(recorder);
  slot.observer.set_forward(slot.recorder.get());
  slot.eng->set_trace_sink(&slot.observer);  // barrier: later events see the recorder
}

std::string flush_trace(const device_slot& slot) {
  if (!slot.recorder) return {};
  const std::filesystem::path path(slot.trace_path);
  if (path.has_parent_path()) {
    std::error_code ignored;
    std::filesystem::create_directories(path.parent_path(), ignored);
  }
  auto written = slot.recorder->flush_to(path, format_for_path(path));
  if (!written) return fmt::format("could not write trace {}: {}", slot.trace_path, written.error().message());
  return {};
}

std::string detach_trace(device_slot& slot) {
  if (!slot.recorder) return {};
  slot.observer.set_forward(nullptr);
  slot.eng->set_trace_sink(&slot.observer);  // barrier: no event uses the recorder after this
  std::string error = flush_trace(slot);
  slot.recorder.reset();
  slot.trace_path.clear();
  return error;
}

}  // namespace phasealloc::interpose
