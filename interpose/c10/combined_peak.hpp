// The peaks of allocated and reserved bytes over both allocators of the bridge
// (torch.cuda.max_memory_allocated / max_memory_reserved).
//
// Design note
// Rationale: max_memory_allocated() and max_memory_reserved() are the memory figures frameworks log
//   and users size jobs by. Under the bridge two allocators hold memory, phasealloc's engine and
//   PyTorch's native allocator (private pools: graphs, MemPool), and each keeps its own peaks. Their
//   sum overstates the process's peak whenever the two peaked at different times (a graph pool filled
//   at start-up, phasealloc's peak in training), and can exceed the device.
// Approach: phasealloc's allocated bytes follow its block events as its books do (alloc adds the
//   block's bytes, free_requested takes them away); its reserved bytes are the level every event
//   carries (phasealloc_event::reserved_bytes), and every change of them comes with a segment event.
//   The events of a device arrive under its engine's lock, so each device has one writer. Native's
//   allocated and reserved bytes are read after every allocation, free or cache release the bridge
//   hands to native. Each side raises a peak with the sum when it changes: the events' peak under the
//   engine lock, native's under a mutex. A combined peak is the larger of the two; a reset sets both
//   to the current sum.
// Limitations: bytes of all pools together (stat type "all") only. Native memory freed outside the
//   bridge (a DataPtr that kept native's own deleter, as CUDA IPC's rehomed storages do) is seen at
//   native's next change. The allocated side orders its two writers with relaxed atomics: an
//   allocation by phasealloc exactly concurrent with one by native may leave their sum unseen.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

namespace phasealloc::c10_bridge {

class combined_peak {
 public:
  static constexpr int max_devices = 64;

  /// An event of phasealloc's engine: block events (alloc, free_requested) move its allocated bytes,
  /// segment events its reserved bytes (`reserved_bytes`, the level after the event). Called under
  /// the device's engine lock: no allocation, no lock, never throws.
  void on_engine_event(int device, int action, std::size_t block_bytes, std::size_t reserved_bytes) noexcept;
  /// Native's bytes of `device` after an allocation, free or cache release the bridge handed to native.
  void on_native_change(int device, std::int64_t native_allocated_bytes, std::int64_t native_reserved_bytes);
  /// resetPeakStats: the peaks become the current sums.
  void reset(int device);
  /// The peak of phasealloc's plus native's allocated bytes on `device`.
  std::int64_t allocated_peak(int device) const;
  /// The peak of phasealloc's plus native's reserved bytes on `device`.
  std::int64_t reserved_peak(int device) const;

 private:
  /// One quantity (allocated or reserved bytes) of both allocators.
  struct sum_books {
    std::atomic<std::int64_t> ours{0};         ///< phasealloc's bytes (one writer: the engine's lock)
    std::atomic<std::int64_t> native{0};       ///< native's, as last read
    std::atomic<std::int64_t> events_peak{0};  ///< raised by phasealloc's events
    std::atomic<std::int64_t> native_peak{0};  ///< raised by native's changes

    std::int64_t peak() const;
    void reset();
  };
  struct books {
    sum_books allocated;
    sum_books reserved;
  };
  books& at(int device);
  const books& at(int device) const;

  std::array<books, max_devices> books_;
  std::mutex native_mutex_;  ///< Orders native-side updates (several threads may route to native).
};

}  // namespace phasealloc::c10_bridge
