#include "memory_pressure.hpp"

#include <atomic>

namespace phasealloc::interpose {
namespace {

std::atomic<phasealloc_pressure_fn> handler_{nullptr};

}  // namespace

void set_pressure_handler(phasealloc_pressure_fn handler) noexcept { handler_.store(handler, std::memory_order_release); }

bool relieve_pressure(int device, std::size_t bytes) noexcept {
  thread_local bool inside = false;
  const phasealloc_pressure_fn handler = handler_.load(std::memory_order_acquire);
  if (handler == nullptr || inside) return false;
  inside = true;
  int relieved = 0;
  try {
    relieved = handler(device, bytes);
  } catch (...) {
    relieved = 0;  // a C handler does not throw; one that does frees nothing here
  }
  inside = false;
  return relieved != 0;
}

}  // namespace phasealloc::interpose
