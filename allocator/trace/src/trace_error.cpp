#include "phasealloc/trace/trace_error.hpp"

#include <fmt/format.h>

namespace phasealloc {

std::string trace_error::message() const {
  std::string where = line != 0 ? fmt::format("{}:{}", file, line) : fmt::format("{}: byte {}", file, offset);
  if (found.empty()) {
    return fmt::format("{}: expected {}", where, expected);
  }
  return fmt::format("{}: expected {}, found {}", where, expected, found);
}

}  // namespace phasealloc
