// The device list and each thread's current device (cudaSetDevice is per thread).
#include <atomic>

#include "simcuda/core.hpp"

namespace simcuda {

namespace {
thread_local int t_current_device = 0;
}

bool valid_device(int device) noexcept { return device >= 0 && device < device_count(); }

int current_device() noexcept { return t_current_device; }

void set_current_device(int device) noexcept {
  if (!valid_device(device)) fatal("set_current_device with an invalid ordinal (callers check first)");
  t_current_device = device;
  mark_device_active(device);
}

}  // namespace simcuda

namespace simcuda {

namespace {
std::atomic<bool> g_active[16];
}

bool device_active(int device) noexcept { return valid_device(device) && g_active[device].load(); }

void mark_device_active(int device) noexcept {
  if (valid_device(device)) g_active[device].store(true);
}

}  // namespace simcuda
