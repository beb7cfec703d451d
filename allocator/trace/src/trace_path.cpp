#include "phasealloc/trace/trace_path.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdlib>

namespace phasealloc {
namespace {

bool rank_from_env(const char* name, std::int64_t& rank) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return false;
  }
  const std::string_view text(value);
  std::int64_t parsed = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (ec != std::errc{} || ptr != text.data() + text.size() || parsed < 0) {
    return false;
  }
  rank = parsed;
  return true;
}

}  // namespace

trace_path_context current_trace_path_context() {
  trace_path_context context;
  context.pid = static_cast<std::int64_t>(::getpid());
  if (!rank_from_env("RANK", context.rank) && !rank_from_env("LOCAL_RANK", context.rank)) {
    context.rank = 0;
  }
  return context;
}

std::string expand_trace_path(std::string_view pattern, const trace_path_context& context) {
  std::string out;
  out.reserve(pattern.size() + 16);
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '%' || i + 1 == pattern.size()) {
      out.push_back(c);
      continue;
    }
    const char next = pattern[i + 1];
    if (next == 'p') {
      out += std::to_string(context.pid);
    } else if (next == 'r') {
      out += std::to_string(context.rank);
    } else if (next == '%') {
      out.push_back('%');
    } else {
      out.push_back('%');
      continue;  // keep the '%' and let the next character be copied as written
    }
    ++i;
  }
  return out;
}

std::string expand_trace_path(std::string_view pattern) {
  return expand_trace_path(pattern, current_trace_path_context());
}

}  // namespace phasealloc
