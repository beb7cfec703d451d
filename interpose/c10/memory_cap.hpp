// One per-process memory fraction over both allocators of the bridge.
//
// Design note
// Rationale: PyTorch's per-process memory fraction (set_per_process_memory_fraction, or
//   per_process_memory_fraction in PYTORCH_CUDA_ALLOC_CONF) caps what the process reserves on a
//   device; colocated processes (a trainer beside an inference engine) rely on it. Under the bridge
//   that memory is held by two allocators, phasealloc's engine and PyTorch's native allocator
//   (private pools: MemPool, graphs). Giving each the fraction would let the two together reach
//   twice the cap, and a fraction kept only as the engine's byte limit cannot read back 0.0.
// Approach: the fraction of each device is kept here and read back as set. The cap is
//   fraction x the device's total memory; each side may reserve the cap less what the other holds
//   when it grows. The engine's limit (phasealloc_set_limit_bytes) is refreshed on the device's
//   first allocation after a change and whenever native's reserved bytes can have changed (after
//   an allocation routed to native, an empty_cache); native's fraction is set just before each
//   routed allocation from phasealloc's reserved bytes. A fraction of 1.0 is no cap: the device's
//   own size is the limit, and neither side is limited.
// Limitations: the engine sees native's reserved bytes as of the last refresh; PyTorch grows its
//   native allocator only through the calls the bridge forwards, so the two agree in practice.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>

#include <c10/cuda/CUDACachingAllocator.h>

namespace phasealloc::c10_bridge {

class memory_cap {
 public:
  static constexpr int max_devices = 64;

  explicit memory_cap(c10::cuda::CUDACachingAllocator::CUDAAllocator* native);

  /// Sets `device`'s fraction (in [0, 1]; checked by the caller) and the native side's.
  void set(c10::DeviceIndex device, double fraction);
  /// Sets every device's fraction at once (PYTORCH_CUDA_ALLOC_CONF's, at CUDA initialisation).
  void set_all(double fraction);
  /// The fraction as set (1.0 when never set).
  double fraction(c10::DeviceIndex device) const;

  /// Whether the engine's limit must be refreshed before `device`'s next allocation.
  bool stale(c10::DeviceIndex device) const {
    return stale_[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
  }
  /// The engine's limit from the cap and native's reserved bytes now.
  void refresh_engine(c10::DeviceIndex device);
  /// Native's fraction from the cap and phasealloc's reserved bytes now (before a routed allocation).
  void before_native(c10::DeviceIndex device);
  /// After native's reserved bytes may have changed: the engine's limit follows.
  void after_native(c10::DeviceIndex device);

 private:
  std::size_t cap_bytes(c10::DeviceIndex device, std::size_t* total_bytes) const;

  c10::cuda::CUDACachingAllocator::CUDAAllocator* native_;
  std::array<std::atomic<double>, max_devices> fraction_;  ///< 1.0 until set
  std::array<std::atomic<bool>, max_devices> stale_;
};

}  // namespace phasealloc::c10_bridge
