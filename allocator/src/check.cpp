#include "phasealloc/check.hpp"

#include <cstdio>
#include <cstdlib>

namespace phasealloc::detail {

void report_fatal(const char* expr, const char* file, int line, const std::string& context) noexcept {
  std::fprintf(stderr, "phasealloc: fatal: %s\n  check: %s\n  at: %s:%d\n", context.c_str(), expr, file, line);
  std::fflush(stderr);
  std::abort();
}

}  // namespace phasealloc::detail
