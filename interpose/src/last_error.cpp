#include "last_error.hpp"

#include <cstdio>
#include <mutex>

namespace phasealloc::interpose {
namespace {

struct error_slot {
  std::mutex mutex;
  std::string message;
};

// Leaked on purpose: frees may still report errors while static destructors run at exit.
error_slot& slot() {
  static error_slot* s = new error_slot;
  return *s;
}

}  // namespace

void set_last_error(std::string_view message) noexcept {
  try {
    error_slot& s = slot();
    std::lock_guard lock(s.mutex);
    s.message.assign(message);
  } catch (...) {
    // Out of host memory while recording an error: nothing better to do.
  }
}

void report_error(std::string_view message) noexcept {
  std::fprintf(stderr, "phasealloc: %.*s\n", static_cast<int>(message.size()), message.data());
  set_last_error(message);
}

std::string last_error() {
  error_slot& s = slot();
  std::lock_guard lock(s.mutex);
  return s.message;
}

void clear_last_error() noexcept {
  error_slot& s = slot();
  std::lock_guard lock(s.mutex);
  s.message.clear();
}

}  // namespace phasealloc::interpose
