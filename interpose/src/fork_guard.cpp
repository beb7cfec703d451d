#include "fork_guard.hpp"

#include <pthread.h>

#include <mutex>

namespace phasealloc::interpose {
namespace {

void on_fork_child() noexcept {
  if (detail::engine_made.load(std::memory_order_relaxed)) detail::forked_child.store(true, std::memory_order_relaxed);
}

}  // namespace

void install_fork_guard() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { (void)pthread_atfork(nullptr, nullptr, &on_fork_child); });
}

}  // namespace phasealloc::interpose
