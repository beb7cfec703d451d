// The peak of allocated bytes over both allocators of the bridge (torch.cuda.max_memory_allocated).
//
// Design note
// Rationale: max_memory_allocated() is the memory figure frameworks log and users size jobs by.
//   Under the bridge two allocators hold memory, phasealloc's engine and PyTorch's native allocator
//   (private pools: graphs, MemPool), and each keeps its own peak. Their sum overstates the process's
//   peak whenever the two peaked at different times (a graph pool filled at start-up, phasealloc's
//   peak in training), and can exceed the device.
// Approach: phasealloc's allocated bytes follow its block events as its books do (alloc adds the
//   block's bytes, free_requested takes them away); the events of a device arrive under its engine's
//   lock, so each device has one writer. Native's allocated bytes are read after every allocation or
//   free the bridge hands to native. Each side raises a peak with the sum when it changes: the events'
//   peak under the engine lock, native's under a mutex. The combined peak is the larger of the two;
//   a reset sets both to the current sum.
// Limitations: allocated bytes of all pools together (stat type "all") only; max_memory_reserved()
//   still adds the two allocators' peaks (phasealloc's segment events do not carry its reserved bytes
//   exactly). Native memory freed outside the bridge (a DataPtr that kept native's own deleter, as CUDA
//   IPC's rehomed storages do) is seen at native's next change.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

namespace phasealloc::c10_bridge {

class combined_peak {
 public:
  static constexpr int max_devices = 64;

  /// A block event of phasealloc's engine (alloc or free_requested; others are ignored). Called
  /// under the device's engine lock: no allocation, no lock, never throws.
  void on_block_event(int device, int action, std::size_t block_bytes) noexcept;
  /// Native's allocated bytes of `device` after an allocation or free the bridge handed to native.
  void on_native_change(int device, std::int64_t native_allocated_bytes);
  /// resetPeakStats: the peak becomes the current sum.
  void reset(int device);
  /// The peak of phasealloc's plus native's allocated bytes on `device`.
  std::int64_t peak(int device) const;

 private:
  struct books {
    std::atomic<std::int64_t> ours{0};         ///< phasealloc's allocated bytes (one writer: the engine's lock)
    std::atomic<std::int64_t> native{0};       ///< native's, as last read
    std::atomic<std::int64_t> events_peak{0};  ///< raised by phasealloc's events
    std::atomic<std::int64_t> native_peak{0};  ///< raised by native's changes
  };
  books& at(int device);
  const books& at(int device) const;

  std::array<books, max_devices> books_;
  std::mutex native_mutex_;  ///< Orders native-side updates (several threads may route to native).
};

}  // namespace phasealloc::c10_bridge
