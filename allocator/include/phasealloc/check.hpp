// Loud failure for broken invariants (never for expected outcomes: those are values, see status.hpp).
//
// PHASEALLOC_CHECK(cond, fmt, args...) is always on; PHASEALLOC_ASSERT is on in debug and
// sanitizer builds. Both print the expression, file:line and a formatted context, then abort.
#pragma once

#include <fmt/format.h>

namespace phasealloc::detail {

[[noreturn]] void report_fatal(const char* expr, const char* file, int line, const std::string& context) noexcept;

}  // namespace phasealloc::detail

#define PHASEALLOC_CHECK(cond, ...)                                                               \
  do {                                                                                            \
    if (!(cond)) [[unlikely]] {                                                                   \
      ::phasealloc::detail::report_fatal(#cond, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
    }                                                                                             \
  } while (false)

#if !defined(NDEBUG) || defined(PHASEALLOC_SANITIZED)
#define PHASEALLOC_ASSERT(cond, ...) PHASEALLOC_CHECK(cond, __VA_ARGS__)
#else
#define PHASEALLOC_ASSERT(cond, ...) \
  do {                               \
  } while (false)
#endif
