// The engine's one lock: every public entry point of phasealloc::engine holds it.
//
// Design note
// Rationale: an allocate + free pair takes the lock twice, on the thread that launches kernels.
//   pthread_mutex_lock / unlock (std::mutex) cost ~100 instructions per pair (type checks, elision,
//   the owner field), most of a malloc's whole budget. Contention is rare: one engine per
//   GPU, PyTorch's allocation calls mostly come from one thread.
// Approach: a three-state futex mutex (Drepper, "Futexes Are Tricky", mutex 2) on a std::atomic
//   with C++20 wait/notify: 0 free, 1 held, 2 held with possible waiters. Uncontended lock is one
//   compare-exchange, unlock one exchange. A contended lock spins briefly (a holder usually leaves
//   within a few hundred nanoseconds), then marks the lock 2 and sleeps until an unlock wakes it.
// Limitations: not recursive, not fair, no owner check (an unlock by another thread is not
//   caught); no priority inheritance. Meets BasicLockable and Lockable, so std::lock_guard and
//   std::unique_lock take it.
#pragma once

#include <atomic>

namespace phasealloc::detail {

class engine_lock {
 public:
  engine_lock() = default;
  engine_lock(const engine_lock&) = delete;
  engine_lock& operator=(const engine_lock&) = delete;

  void lock() noexcept {
    int expected = 0;
    if (state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed))
        [[likely]] {
      return;
    }
    lock_contended();
  }
  bool try_lock() noexcept {
    int expected = 0;
    return state_.compare_exchange_strong(expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) [[unlikely]] state_.notify_one();
  }

 private:
  void lock_contended() noexcept {
    for (int spin = 0; spin < spin_limit; ++spin) {
      int expected = 0;
      if (state_.load(std::memory_order_relaxed) == 0 &&
          state_.compare_exchange_weak(expected, 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        return;
      }
      cpu_relax();
    }
    // Announce a waiter (2) and sleep while the lock stays held; whoever takes it from here keeps it
    // at 2, so its unlock wakes the next sleeper.
    while (state_.exchange(2, std::memory_order_acquire) != 0) state_.wait(2, std::memory_order_relaxed);
  }

  static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  static constexpr int spin_limit = 100;
  std::atomic<int> state_{0};
};

}  // namespace phasealloc::detail
