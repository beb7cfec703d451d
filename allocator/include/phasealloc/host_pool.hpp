// host_pool: page-locked host buffers for offload copies, reused across iterations under a byte
// budget (ProTrain's chunk buffers, on the host side).
//
// Glossary
//   buffer    one host_memory allocation (cudaHostAlloc), the pool's unit; never split.
//   active    handed out by acquire() and not yet released.
//   pending   released with a stream: the copy enqueued on it before the release may still read or
//             write the buffer, so it is reused only after the event recorded there completes.
//   idle      cached, ready for reuse.
//   budget    the most page-locked bytes the pool holds at once (active + pending + idle).
//
// Design note
// Rationale: offloading parameter or optimizer chunks copies them to host memory and back every
//   iteration. Copies overlap compute only into page-locked memory, and cudaHostAlloc is slow
//   (milliseconds per GiB: it maps and locks pages) and takes RAM from everyone else, so a
//   framework allocates the buffers once and reuses them (ProTrain: #buffers = prefetch depth).
//   PyTorch's CachingHostAllocator caches too, but without a bound: it keeps whatever the largest
//   iteration asked for, and its sizes round to powers of two (up to 2x the RAM locked).
// Approach: buffers are sized to the request rounded up to 4 KiB (under 2 MiB) or 2 MiB; acquire
//   reuses the smallest idle buffer that fits with at most 1/8 waste, oldest-released first among
//   equals; a release with a stream records an event there and the buffer turns idle when it
//   completes. A miss that would exceed the budget first waits for a pending copy into a buffer
//   that fits, else frees idle buffers (least recently released first), then waits for the
//   oldest pending copy; when nothing is left to free the acquire fails with over_budget and the
//   caller copies through pageable memory instead.
// Limitations: a buffer serves one request at a time (no suballocation); the budget bounds what the
//   pool locks, not what its caller locks elsewhere. Lookups scan every buffer the pool holds,
//   which the budget keeps to tens (offload chunks are megabytes); not for many small buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "phasealloc/device.hpp"
#include "phasealloc/host_memory.hpp"
#include "phasealloc/stats.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc {

struct host_pool_options {
  std::size_t budget_bytes = 2 * gib;  ///< Most page-locked bytes held at once.
};

struct host_buffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;  ///< Usable size (>= the request).
};

enum class host_pool_errc {
  over_budget,      ///< Every buffer the budget allows is active: copy through pageable memory.
  host_refused,     ///< host_memory could not allocate (out of lockable memory, driver error).
  invalid_request,  ///< Zero bytes, or more than the whole budget.
};

struct host_pool_error {
  host_pool_errc code = host_pool_errc::over_budget;
  std::string message;  ///< Names the request, the budget and what the pool held.
};

/// Books named like torch.cuda.host_memory_stats(): allocations/allocated_bytes are the buffers
/// the pool holds from host_memory, active_requests/active_bytes those handed out.
struct host_pool_stats {
  stat allocations;
  stat allocated_bytes;
  stat active_requests;
  stat active_bytes;
  std::int64_t num_host_alloc = 0;
  std::int64_t num_host_free = 0;
  std::int64_t num_reuses = 0;       ///< Acquires served by a cached buffer.
  std::int64_t num_waits = 0;        ///< Acquires that waited for a pending copy to finish.
  std::int64_t num_over_budget = 0;  ///< Acquires refused with over_budget.
  std::size_t budget_bytes = 0;
};

class host_pool {
 public:
  /// `events` is the device whose streams the copies run on (for release with a stream); it may be
  /// null when every release is synchronous. Both must outlive the pool.
  host_pool(host_memory& memory, device* events, host_pool_options options = {});
  ~host_pool();  ///< Waits for pending copies and frees every buffer (active ones too).
  host_pool(const host_pool&) = delete;
  host_pool& operator=(const host_pool&) = delete;

  result<host_buffer, host_pool_error> acquire(std::size_t bytes);
  /// Hands a buffer back. With `record`, the work enqueued on `stream` so far may still use it:
  /// it is reused only after that. unknown_pointer / double_free name a misuse; nothing changes.
  errc release(void* ptr, stream_id stream = 0, bool record = false);
  /// Frees idle buffers (least recently released first) until the pool holds at most
  /// `keep_bytes`; returns the bytes freed. Pending buffers are kept.
  std::size_t trim(std::size_t keep_bytes = 0);
  host_pool_stats stats() const;
  /// Peaks to current (torch.cuda.reset_peak_host_memory_stats); the counts stay.
  void reset_peak_stats();
  /// allocated/freed sums and the event counters to zero.
  void reset_accumulated_stats();

 private:
  enum class state : std::uint8_t { active, pending, idle };
  struct buffer_info {
    std::size_t bytes = 0;
    state st = state::idle;
    event_id event = 0;          ///< Pending: the event recorded at release.
    std::uint64_t released = 0;  ///< Release order (LRU key for idle buffers).
  };

  void collect_pending();
  bool wait_oldest_pending();
  /// Waits for the oldest pending buffer that fits `rounded` and returns it idle (nullptr: none).
  void* wait_pending_fit(std::size_t rounded);
  bool free_oldest_idle();
  void free_buffer(void* ptr);
  void* find_idle(std::size_t rounded) const;

  mutable std::mutex mutex_;
  host_memory& memory_;
  device* events_;
  host_pool_options options_;
  std::map<void*, buffer_info> buffers_;
  std::vector<void*> pending_;           ///< In release order.
  std::vector<event_id> spare_events_;
  std::uint64_t release_clock_ = 0;
  host_pool_stats stats_;
};

}  // namespace phasealloc
