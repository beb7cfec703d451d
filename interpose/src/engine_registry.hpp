// One engine per GPU ordinal, created on first use; the process-wide phase; the trace switch.
//
// Design note
// Rationale: PyTorch names the device in every malloc, and a process may touch several GPUs, each
//   needing its own engine (books, streams, device memory). Building an engine builds a device,
//   which for CUDA creates a context: only ordinals actually used may pay for that. Phases are
//   process-wide facts ("this process is generating"), so a transition applies to every engine,
//   including engines created after it.
// Approach: a fixed array of atomic slot pointers, read lock-free on the allocation path. The
//   first use of an ordinal takes the registry mutex, checks again, builds device + policy +
//   engine + the host memory of its offload pool (a once-style guard: a failure is remembered and
//   answered again, never retried; the pool itself waits for its first use, host_pool_slot.hpp),
//   replays the current phase stack onto the new engine, attaches the running trace, and
//   publishes the slot. Phase transitions and trace start/stop take the same mutex, so a new
//   engine never misses one. Lock order: registry, then an engine (never the reverse).
//   Slots are never destroyed: tensors may be freed during interpreter teardown, after any static
//   destructor would have run (PyTorch leaks its allocator for the same reason).
// Limitations: ordinals 0..max_devices-1.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "device_slot.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc::interpose {

class engine_registry {
 public:
  static constexpr int max_devices = 64;

  /// The process's registry (created on first use, never destroyed). Inline: every malloc asks.
  static engine_registry& instance() {
    if (engine_registry* r = instance_.load(std::memory_order_acquire)) [[likely]] return *r;
    return make_instance();
  }

  /// The slot of `ordinal`, created on first use; or why it cannot be (bad configuration, no device).
  result<device_slot*, std::string> slot(int ordinal);
  /// The slot of `ordinal` if it was created, else nullptr. Lock-free.
  device_slot* existing(int ordinal) const noexcept {
    if (ordinal < 0 || ordinal >= max_devices) return nullptr;
    return slots_[static_cast<std::size_t>(ordinal)].load(std::memory_order_acquire);
  }
  /// Every created slot, in ordinal order. Lock-free snapshot.
  std::vector<device_slot*> created() const;

  /// Device count PyTorch reported at CUDA initialisation (0 = not told).
  void note_device_count(int count) noexcept { device_count_.store(count, std::memory_order_relaxed); }
  int device_count() const noexcept { return device_count_.load(std::memory_order_relaxed); }

  /// Holds (or lets go) the synchronising device calls of `ordinal`'s engine, created or not yet
  /// (engine::hold_device_calls): a CUDA graph capture or a private-pool route is under way there.
  std::string hold_device_calls(int ordinal, bool held);  ///< "" or an error message.
  /// Lets GPU `peer` reach the memory of `ordinal`'s engine, created or not yet (then at creation).
  std::string grant_peer_access(int ordinal, int peer);  ///< "" or an error message.

  // --- phases (every engine) ---------------------------------------------------------------------
  std::string begin_phase(std::string_view name);  ///< "" or an error message.
  std::string end_phase();
  std::string set_phase(std::string_view name);
  std::string current_phase() const;

  // --- traces (every engine, and engines created while the trace runs) ----------------------------
  std::string start_trace(std::string_view pattern);  ///< "" or an error message.
  std::string stop_trace();
  /// Writes every running trace's file now (recording goes on); the errors, joined ("" if none).
  std::string flush_traces();
  bool tracing() const;
  /// Writes the running traces when a checkpoint is due (trace_control.hpp): at empty_cache, and
  /// every quiet_checkpoint_period from a background thread.
  void checkpoint_traces();
  /// How often the background thread offers a checkpoint (the 1% rule still decides).
  static constexpr std::chrono::milliseconds quiet_checkpoint_period{250};

  /// Makes every engine read its observer's wanted_ops() again (after the event listener changed).
  void refresh_sinks();

  // --- misuse the interpose layer itself saw (no engine involved) -------------------------------
  std::int64_t count_misuse() noexcept { return misuse_.fetch_add(1, std::memory_order_relaxed) + 1; }
  std::int64_t misuse_count() const noexcept { return misuse_.load(std::memory_order_relaxed); }

 private:
  engine_registry() = default;
  static engine_registry& make_instance();

  static std::atomic<engine_registry*> instance_;  ///< Published once by make_instance().
  result<device_slot*, std::string> create_locked(int ordinal);
  void flush_traces_at_exit();
  /// Writes the running traces at a phase transition when due (trace_control.hpp, Checkpoints).
  void checkpoint_traces_locked();

  mutable std::mutex mutex_;
  std::array<std::atomic<device_slot*>, max_devices> slots_{};
  std::array<std::string, max_devices> failures_;  ///< Why an ordinal has no engine (guarded by mutex_).
  std::array<bool, max_devices> held_{};            ///< hold_device_calls per ordinal (guarded by mutex_).
  std::array<std::vector<int>, max_devices> peers_;  ///< Peers granted access per ordinal (guarded by mutex_).
  std::atomic<int> device_count_{0};
  std::atomic<std::int64_t> misuse_{0};

  // Phase mirror (guarded by mutex_): the bottom phase (replaced by set_phase when nothing is
  // pushed) and the pushed phases.
  std::string bottom_phase_ = "unphased";
  std::vector<std::string> phase_stack_;

  std::string trace_pattern_;  ///< Running trace ("" = none), guarded by mutex_.
  bool exit_flush_registered_ = false;
  std::chrono::steady_clock::time_point next_checkpoint_{};  ///< Guarded by mutex_.
  bool checkpoint_failed_ = false;                           ///< Reported once; no checkpoint after.
  bool checkpoint_thread_started_ = false;  ///< The quiet-time checkpoints (trace_control.hpp), once a process.
  bool exiting_ = false;                    ///< The exit flush ran: no checkpoint after it.
};

}  // namespace phasealloc::interpose
