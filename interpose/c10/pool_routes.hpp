// Which allocations belong to PyTorch's native allocator: those routed into a private pool.
//
// Design note
// Rationale: CUDA graph capture, torch.cuda.MemPool and use_mem_pool all work through private
//   pools (beginAllocateToPool(device, pool, filter) ... endAllocateToPool), and PyTorch's own
//   allocator implements their semantics (pool lifetime, deferred frees during capture, a
//   pool's custom allocator such as vLLM's CuMemAllocator). The bridge hands those pools to the
//   native allocator and keeps everything else.
// Approach: the bridge forwards begin/end to the native allocator and records the same routes
//   here. An allocation on (device, stream) is routed when a route of that device accepts the
//   stream; the native allocator then applies the same filter and puts it in the pool. With no
//   route active (the common case) the check is one relaxed atomic load.
// Limitations: a filter is called twice per routed allocation (here and natively); PyTorch's
//   filters are cheap (a thread id compare, or cudaStreamGetCaptureInfo).
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>
#include <cuda_runtime_api.h>

namespace phasealloc::c10_bridge {

class pool_routes {
 public:
  using filter_fn = std::function<bool(cudaStream_t)>;

  void begin(c10::DeviceIndex device, c10::MempoolId_t pool, filter_fn filter);
  /// Removes the oldest route of (device, pool); a no-op when there is none.
  void end(c10::DeviceIndex device, c10::MempoolId_t pool);
  /// Whether an allocation on (device, stream) goes to a native private pool.
  bool routed(c10::DeviceIndex device, cudaStream_t stream) const;
  /// Whether any route is active (a capture or a use_mem_pool block is under way somewhere).
  bool any() const { return count_.load(std::memory_order_relaxed) != 0; }
  /// How many routes of `device` are active.
  std::size_t count(c10::DeviceIndex device) const;

 private:
  struct route {
    c10::DeviceIndex device;
    c10::MempoolId_t pool;
    filter_fn filter;
  };
  mutable std::mutex mutex_;
  std::vector<route> routes_;
  std::atomic<std::size_t> count_{0};
};

}  // namespace phasealloc::c10_bridge
