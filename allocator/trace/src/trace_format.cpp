#include "phasealloc/trace/trace_format.hpp"

#include <array>
#include <utility>

namespace phasealloc {
namespace {

constexpr std::array<std::string_view, trace_event_op_count> op_names = {
    "alloc",         "free",         "phase",       "empty_cache",   "record_stream",
    "segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom",           "seed_block",
    "offload",       "restore",
};

constexpr std::array<std::pair<std::uint8_t, std::string_view>, 5> flag_names = {{
    {trace_flag::seeded, "seeded"},
    {trace_flag::small_pool, "small_pool"},
    {trace_flag::expandable, "expandable"},
    {trace_flag::allocated, "allocated"},
    {trace_flag::unmapped, "unmapped"},
}};

}  // namespace

std::string_view to_string(trace_event_op op) noexcept {
  const auto index = static_cast<std::size_t>(op);
  return index < op_names.size() ? op_names[index] : std::string_view{"unknown"};
}

std::optional<trace_event_op> parse_trace_event_op(std::string_view name) noexcept {
  for (std::size_t i = 0; i < op_names.size(); ++i) {
    if (op_names[i] == name) {
      return static_cast<trace_event_op>(i);
    }
  }
  return std::nullopt;
}

std::string format_trace_flags(std::uint8_t flags) {
  std::string out;
  for (const auto& [bit, name] : flag_names) {
    if ((flags & bit) != 0) {
      out += out.empty() ? "" : "|";
      out += name;
    }
  }
  return out.empty() ? std::string("-") : out;
}

std::optional<std::uint8_t> parse_trace_flags(std::string_view text) noexcept {
  if (text == "-") {
    return std::uint8_t{0};
  }
  std::uint8_t flags = 0;
  while (true) {
    const std::size_t bar = text.find('|');
    const std::string_view word = text.substr(0, bar);
    bool known = false;
    for (const auto& [bit, name] : flag_names) {
      if (name == word) {
        flags |= bit;
        known = true;
      }
    }
    if (!known) {
      return std::nullopt;
    }
    if (bar == std::string_view::npos) {
      return flags;
    }
    text.remove_prefix(bar + 1);
  }
}

std::uint32_t intern_string(trace& t, std::string_view text) {
  for (std::size_t i = 0; i < t.strings.size(); ++i) {
    if (t.strings[i] == text) {
      return static_cast<std::uint32_t>(i);
    }
  }
  t.strings.emplace_back(text);
  return static_cast<std::uint32_t>(t.strings.size() - 1);
}

const std::string* find_property(const trace_metadata& meta, std::string_view key) noexcept {
  for (const auto& p : meta.properties) {
    if (p.key == key) {
      return &p.value;
    }
  }
  return nullptr;
}

void set_property(trace_metadata& meta, std::string_view key, std::string_view value) {
  for (auto& p : meta.properties) {
    if (p.key == key) {
      p.value = value;
      return;
    }
  }
  meta.properties.push_back({std::string(key), std::string(value)});
}

}  // namespace phasealloc
