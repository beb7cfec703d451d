// The engine's private state and the helpers its files share (engine.cpp: allocate/free/phases;
// engine_grow.cpp: growing; engine_release.cpp: releasing cached memory; invariants.cpp: the
// checker).
#pragma once

#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "block.hpp"
#include "block_pool.hpp"
#include "node_recycler.hpp"
#include "phase_book.hpp"
#include "phasealloc/engine.hpp"

namespace phasealloc::detail {

struct pending_free {
  block* b = nullptr;
  event_id event = 0;
};

class engine_impl {
 public:
  engine_impl(device& dev, policy& pol, engine_options options);
  ~engine_impl();

  // Every public entry point of phasealloc::engine locks mutex_ and calls one of these.
  result<device_address, alloc_error> allocate(std::size_t bytes, stream_id stream, std::uint32_t tag);
  errc deallocate(device_address addr, std::size_t size_bytes);
  errc record_stream(device_address addr, stream_id stream);
  std::size_t run_plan(const release_plan& plan);
  result<std::vector<device_address>, std::string> seed(const std::vector<seed_segment>& segments);
  phase_id transition(std::string_view name, int kind);  // kind: 0 push, 1 pop, 2 replace
  device_stats stats() const;
  snapshot take_snapshot() const;
  std::vector<std::string> check_invariants() const;
  /// Folds the levels into the phase book: after every operation, and inside one wherever reserved
  /// rises (a segment or pages added), so a peak that an out-of-memory release undoes before the
  /// operation ends still counts, as in torch's stats.
  void observe_levels(bool settled = true);
  void after_operation();

  mutable std::mutex mutex_;
  device& device_;
  policy& policy_;
  engine_options options_;
  /// Above this a request is out of memory before any policy sees it: the device's capacity (capped
  /// so that rounding cannot overflow). Fixed at construction: the allocation path reads a member.
  std::size_t max_request_bytes_ = 0;
  std::vector<pool_traits> pool_traits_;
  /// Recycles the nodes of the pool sets and the live map (declared before them: outlives them).
  node_recycler nodes_;
  std::vector<block_pool> pools_;
  std::map<device_address, std::unique_ptr<segment>> segments_;
  /// Expandable reservations of each (pool, stream), in address order: usually one; another is
  /// added when no chain of free and unmapped blocks in the others holds a request.
  std::map<std::pair<pool_id, stream_id>, std::vector<segment*>> expandable_;
  std::pmr::unordered_map<device_address, block*> live_{&nodes_};
  std::vector<pending_free> pending_;
  std::vector<event_id> spare_events_;
  block_arena arena_;
  device_stats stats_;
  phase_book phases_;
  trace_sink* sink_ = nullptr;
  /// Changes of phase so far: a free block with an older free_epoch was left over by an
  /// earlier phase (release_step::stale_min_run_bytes).
  std::uint64_t phase_epoch_ = 0;
  misuse_report last_misuse_;

 private:
  // --- allocation path (engine.cpp) ---
  block* grow(const alloc_request& request, pool_id pool, std::size_t rounded, alloc_error& error);
  /// The out-of-memory error users read, from the books as they stand.
  void fill_oom_report(const alloc_request& request, std::string_view pool_name, std::size_t rounded,
                       std::size_t grow_bytes, alloc_error& error) const;
  /// The largest request the engine passes to its policy: the device's capacity (bounded so that a
  /// policy's rounding and a segment's granularity can never overflow).
  std::size_t max_request_bytes() const { return max_request_bytes_; }
  block* try_grow_once(const alloc_request& request, pool_id pool, std::size_t rounded, std::size_t& grow_bytes);
  block* new_segment(pool_id pool, stream_id stream, std::size_t bytes);
  /// Books a reservation as a segment with one block covering it (free, or unmapped when expandable).
  segment* add_segment(device_address addr, std::size_t bytes, pool_id pool, stream_id stream, bool expandable);
  /// `new_reservation`: with no room in this pool and stream's reservations, add one (always so for
  /// torch_expandable pools).
  block* grow_expandable(const alloc_request& request, pool_id pool, std::size_t rounded, std::size_t& grow_bytes,
                         bool new_reservation = false);
  /// Maps the front of unmapped run `u` (at least need_bytes, whole pages), merges it with its free
  /// neighbours and puts the result in the pool; nullptr when the device or the limit refuses.
  block* map_run(const alloc_request& request, pool_id pool, std::size_t rounded, block* u, std::size_t need_bytes);
  segment* new_expandable_segment(pool_id pool, stream_id stream);
  block* take(block* b, pool_id pool, std::size_t rounded);
  block* split_front(block* b, std::size_t bytes);
  void free_block(block* b);
  void process_events();
  errc report_misuse(errc code, device_address addr, std::size_t size_bytes, std::size_t expected_bytes,
                     std::string message);
  errc classify_unknown(device_address addr, std::size_t size_bytes);
  grow_context make_grow_context(const alloc_request& request, pool_id pool, std::size_t rounded,
                                 std::size_t grow_bytes) const;

 public:
  // --- shared helpers ---
  void emit(trace_op op, device_address addr, std::size_t requested, std::size_t bytes, stream_id stream,
            std::uint32_t tag = 0, std::string_view name = {});
  bool is_small(pool_id pool) const { return pool_traits_[pool].small; }
  std::size_t limit() const { return options_.limit_bytes; }
  std::size_t largest_free_bytes() const;
  byte_levels levels() const;
  void count_device(std::int64_t device_stats::*global, std::int64_t phase_stats::*phase);
  /// Merges b with free neighbours of the same kind (free with no events, or unmapped);
  /// returns the surviving block. b must not be in a pool.
  block* merge_neighbours(block* b);
  void synchronize_pending();

  // --- release (engine_release.cpp) ---
  std::size_t run_step(const release_step& step);
  std::size_t release_segment(segment* seg);
  /// Unmaps the pages wholly inside free block b, at most about `limit_bytes` of them (the upper
  /// ones, which join the unmapped space above); returns the bytes unmapped (0 if none).
  std::size_t unmap_block_pages(block* b, std::size_t limit_bytes = SIZE_MAX);
  std::size_t page_bytes_of(const segment& seg) const;
};

}  // namespace phasealloc::detail
