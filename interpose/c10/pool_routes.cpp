#include "pool_routes.hpp"

#include <algorithm>

namespace phasealloc::c10_bridge {

void pool_routes::begin(c10::DeviceIndex device, c10::MempoolId_t pool, filter_fn filter) {
  std::lock_guard lock(mutex_);
  routes_.push_back(route{device, pool, std::move(filter)});
  count_.store(routes_.size(), std::memory_order_relaxed);
}

void pool_routes::end(c10::DeviceIndex device, c10::MempoolId_t pool) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(routes_.begin(), routes_.end(),
                               [&](const route& r) { return r.device == device && r.pool == pool; });
  if (it != routes_.end()) routes_.erase(it);
  count_.store(routes_.size(), std::memory_order_relaxed);
}

bool pool_routes::routed(c10::DeviceIndex device, cudaStream_t stream) const {
  if (count_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard lock(mutex_);
  return std::any_of(routes_.begin(), routes_.end(),
                     [&](const route& r) { return r.device == device && (!r.filter || r.filter(stream)); });
}

std::size_t pool_routes::count(c10::DeviceIndex device) const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(routes_.begin(), routes_.end(), [&](const route& r) { return r.device == device; }));
}

}  // namespace phasealloc::c10_bridge
