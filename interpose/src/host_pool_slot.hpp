// The host buffer pool of one GPU ordinal: page-locked buffers for offload copies
// (phasealloc_host_alloc / _free / _trim), created at first use.
//
// Design note
// Rationale: a buffer handed back while a copy on one of this GPU's streams may still read or write
//   it can be reused only after that copy, so the pool records its events with the ordinal's
//   device; and a process that never offloads must neither build a pool nor lock a byte. One pool
//   per ordinal keeps one GPU's offload traffic from evicting another's buffers.
// Approach: the slot owns the host memory (device_factory.cpp: model_host_memory for the model device,
//   cuda_host_memory for CUDA devices) and the budget (host_budget). pool() builds the host_pool
//   under a mutex at the first call and publishes it through an atomic pointer, so frees, trims and
//   stats find it without locking. Budget 0 means no pool: pool() answers why. Like the slot, the
//   pool lives until the process ends.
// Limitations: the budget applies per GPU ordinal: a process offloading from N GPUs may lock up to
//   N x host_budget bytes. A buffer must be freed to the ordinal that allocated it (elsewhere it is
//   an unknown pointer).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "phasealloc/device.hpp"
#include "phasealloc/host_memory.hpp"
#include "phasealloc/host_pool.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc::interpose {

class host_pool_slot {
 public:
  /// `events` is the ordinal's device (must outlive the slot). budget_bytes 0: no pool.
  host_pool_slot(device& events, std::unique_ptr<host_memory> memory, std::size_t budget_bytes);
  ~host_pool_slot();
  host_pool_slot(const host_pool_slot&) = delete;
  host_pool_slot& operator=(const host_pool_slot&) = delete;

  /// The pool, created at the first call; or why there is none (host_budget:0).
  result<host_pool*, std::string> pool();
  /// The pool if it was created, else nullptr. Lock-free.
  host_pool* existing() const noexcept { return published_.load(std::memory_order_acquire); }
  /// The pool's books; before the pool exists, zeros with the configured budget.
  host_pool_stats stats() const;
  std::size_t budget_bytes() const noexcept { return budget_bytes_; }

 private:
  device& events_;
  std::unique_ptr<host_memory> memory_;
  const std::size_t budget_bytes_;
  std::mutex mutex_;                 ///< Serialises the pool's creation.
  std::unique_ptr<host_pool> pool_;  ///< Destroyed before memory_ (declared after it).
  std::atomic<host_pool*> published_{nullptr};
};

/// The books of a device whose slot (or pool) does not exist yet: zeros, this budget.
host_pool_stats empty_host_pool_stats(std::size_t budget_bytes) noexcept;

}  // namespace phasealloc::interpose
