// The engine's private state and the helpers its files share (engine.cpp: allocate/free/phases;
// engine_grow.cpp: growing; engine_release.cpp: releasing cached memory; deferred_free.cpp: the
// deferred merge; invariants.cpp: the checker). The hot path (allocate_hot, deallocate_hot) is inline
// here, so the facade in engine.cpp runs it without a call.
#pragma once

#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <vector>

#include "block.hpp"
#include "block_books.hpp"
#include "block_pool.hpp"
#include "engine_lock.hpp"
#include "live_table.hpp"
#include "node_recycler.hpp"
#include "phase_book.hpp"
#include "phasealloc/engine.hpp"

namespace phasealloc::detail {

struct pending_free {
  block* b = nullptr;
  event_id event = 0;
};

/// Whole pages of one segment whose memory is the host's (engine_offload.cpp).
struct offloaded_range {
  device_address addr = 0;
  std::size_t bytes = 0;
  segment* seg = nullptr;
  /// Blocks overlapping the range that are allocated or pending free: at 0 the range is dropped.
  std::size_t live_blocks = 0;
  /// The call whose move of the range is in flight (0: none). A range in flight is the device's
  /// memory in the books (reserved, not offloaded): an offload's until its finish, a restore's
  /// from its start; its blocks stay `offloaded` (out of every pool) until the finish.
  std::uint64_t in_flight = 0;
  bool restoring = false;  ///< The move in flight is a restore.
  /// An offload in flight: the live blocks its call named (some may lie partly outside the range),
  /// traced as offloaded when it lands, after the segment_unmap (what an observer of the trace
  /// expects: the blocks stay the engine's at their addresses).
  std::vector<device_address> named;

  device_address end() const noexcept { return addr + bytes; }
};

class engine_impl {
 public:
  engine_impl(device& dev, policy& pol, engine_options options);
  ~engine_impl();

  // Every public entry point of phasealloc::engine locks mutex_ and calls one of these.
  /// `place_bytes`: what the block must hold, max(bytes, the caller's min_block_bytes).
  result<device_address, alloc_error> allocate(std::size_t bytes, std::size_t place_bytes, stream_id stream,
                                               std::uint32_t tag);
  errc deallocate(device_address addr, std::size_t size_bytes);
  errc record_stream(device_address addr, stream_id stream);
  std::size_t run_plan(const release_plan& plan);
  result<std::vector<device_address>, std::string> seed(const std::vector<seed_segment>& segments);
  result<offload_outcome, offload_error> offload(std::span<const device_address> addrs, const move_options& options);
  result<offload_outcome, offload_error> restore(std::span<const device_address> addrs, const move_options& options);
  result<bool, offload_error> finish_moves(std::uint64_t ticket, bool wait);
  errc order_after_moves(std::uint64_t ticket, stream_id stream);
  /// The kept failure of a move no caller could be told of (then cleared), prefixed as earlier.
  std::optional<offload_error> take_unreported_move_error();
  /// The allocated blocks carrying `tag`, offloaded ones included, in address order.
  std::vector<device_address> tagged_blocks(std::uint32_t tag) const;
  phase_id transition(std::string_view name, int kind);  // kind: 0 push, 1 pop, 2 replace
  device_stats stats() const;
  snapshot take_snapshot() const;
  std::vector<std::string> check_invariants() const;
  /// Folds the levels into the phase book: after every operation, and inside one wherever reserved
  /// rises (a segment or pages added), so a peak that an out-of-memory release undoes before the
  /// operation ends still counts, as in torch's stats.
  void observe_levels(bool settled = true) {
    if (phases_.observe(levels(), settled)) note_reserved_peak();
  }
  void after_operation() {
    observe_levels();
    if (options_.check_invariants) check_or_abort();
  }
  /// Reserved reached a new peak for the phase: records the largest free block at it.
  void note_reserved_peak();
  /// Runs the invariant checker and aborts with what it found broken.
  void check_or_abort() const;
  /// Books the deferred free (deferred_free.cpp) as an eager free would have: merged with its free
  /// neighbour and in its pool. Every operation but allocate's and free's fast paths calls it first,
  /// so everything that reads the pools sees the books of an engine that merges at once.
  void settle() {
    if (deferred_ != nullptr) settle_deferred();
  }

  mutable engine_lock mutex_;
  device& device_;
  policy& policy_;
  engine_options options_;
  bool device_calls_held_ = false;  ///< engine::hold_device_calls
  /// Above this a request is out of memory before any policy sees it: the device's capacity (capped
  /// so that rounding cannot overflow). Fixed at construction: the allocation path reads a member.
  std::size_t max_request_bytes_ = 0;
  std::vector<pool_traits> pool_traits_;
  /// Recycles the nodes of the pool sets (declared before them: outlives them).
  node_recycler nodes_;
  std::vector<block_pool> pools_;
  std::map<device_address, std::unique_ptr<segment>> segments_;
  std::uint64_t segments_made_ = 0;  ///< Segments and reservations made so far (segment::age_rank).
  /// Expandable reservations of each (pool, stream), in address order: usually one; another is
  /// added when no chain of free and unmapped blocks in the others holds a request.
  std::map<std::pair<pool_id, stream_id>, std::vector<segment*>> expandable_;
  live_table live_;
  std::vector<pending_free> pending_;
  std::vector<event_id> spare_events_;
  block_arena arena_;
  device_stats stats_;
  phase_book phases_;
  trace_sink* sink_ = nullptr;
  /// sink_->wanted_ops() when the sink was set (0 with no sink): emit() tests one bit.
  trace_op_mask sink_ops_ = 0;
  /// Changes of phase so far: a free block with an older free_epoch was left over by an
  /// earlier phase (release_step::stale_min_run_bytes).
  std::uint64_t phase_epoch_ = 0;
  /// Transitions so far (every one, also into the same phase): block::birth_interval.
  std::uint32_t interval_ = 0;
  /// Bytes of the allocated blocks and of the deferred free by birth_interval (index), kept as blocks
  /// come and go (transition_context::live_bytes_by_interval, read after a settle); one entry per
  /// interval so far. The deferred block stays counted until it settles or is taken back, so the
  /// hot path's free-then-allocate in one interval changes no sum.
  std::vector<std::size_t> live_bytes_by_interval_ = std::vector<std::size_t>(1, 0);
  /// transition()'s live blocks for the policy, kept to reuse its capacity.
  std::vector<live_block> live_blocks_;
  misuse_report last_misuse_;
  /// The last freed block while its merge is deferred (deferred_free.cpp): free, in no pool, its
  /// free neighbour (if any) still in the pool on its own. nullptr when the books are settled.
  block* deferred_ = nullptr;
  /// The deferred block's requested size (its block has it reset, as every free block).
  std::size_t deferred_requested_ = 0;
  /// Free-then-allocate pairs whose stat sums are not booked yet (block_books.hpp).
  pair_batch pairs_;
  /// Offloaded page ranges by address (engine_offload.cpp).
  std::map<device_address, offloaded_range> offloaded_;
  /// offload() and restore() calls so far: the ordinal their trace events share.
  std::uint64_t move_calls_ = 0;
  /// Ranges of offloaded_ whose move is in flight.
  std::size_t moves_in_flight_ = 0;
  /// A move that failed to finish where no caller could be told (land_moves_quietly, a free).
  std::optional<offload_error> unreported_move_error_;

 private:
  /// The policy's last rounding and pool choice, by request (engine.cpp's note on the fast path).
  struct policy_answer {
    std::size_t bytes = SIZE_MAX;
    std::size_t place_bytes = SIZE_MAX;
    stream_id stream = 0;
    std::uint32_t tag = 0;
    std::size_t rounded = 0;
    pool_id pool = 0;
    placement where = placement::best_fit;  ///< lowest_address answers are not kept (allocate())
  };
  policy_answer last_answer_;
  /// The last time take_deferred handed its block out: while the pool is unchanged (its version)
  /// and the question the same, the answer is the same (deferred_free.cpp).
  /// The pool, its stream and the size are the deferred block's own (checked before asking), the
  /// partner is its free next neighbour: with the pool unchanged, block and address name the question.
  struct deferred_hit {
    std::uint64_t pool_version = 0;
    const block* deferred = nullptr;  ///< nullptr: nothing remembered
    device_address addr = 0;
  };
  deferred_hit last_hit_;
  /// Forgets last_answer_ and last_hit_: called before every policy hook that may change the
  /// policy's state, so that nothing the policy answered before is reused after it.
  void forget_policy_answers() noexcept {
    last_answer_.bytes = SIZE_MAX;
    last_hit_.deferred = nullptr;
  }

  // --- the deferred merge (deferred_free.cpp) ---
  /// Whether the free of live block b (no stream uses, settled books) may be deferred.
  bool deferrable(const block* b) const noexcept {
    return options_.defer_frees && !b->offloaded && !(b->prev != nullptr && b->prev->state == block_state::free && b->prev->event_count == 0) &&
           pool_traits_[b->seg->pool].growth != growth_style::expandable_segments;
  }
  /// Marks b free and deferred (its levels already lowered by the caller).
  void defer(block* b) noexcept {
    const block_pool& pool = pools_[b->seg->pool];
    deferred_requested_ = b->requested_bytes;
    b->requested_bytes = 0;
    b->state = block_state::free;
    b->tag = 0;
    b->free_since = pool.lookups();  // the stamps the eager insert would give the merged block now
    b->free_epoch = pool.epoch();
    deferred_ = b;
  }
  /// The deferred block taken back for the same requested size: the levels return, the sums batch.
  device_address allocate_again(block* b, std::size_t bytes, stream_id stream, std::uint32_t tag) {
    b->state = block_state::allocated;
    b->requested_bytes = bytes;
    b->tag = tag;
    if (b->birth_interval != interval_) {  // its bytes stayed counted while it was deferred
      live_bytes_by_interval_[b->birth_interval] -= b->bytes;
      live_bytes_by_interval_[interval_] += b->bytes;
      b->birth_interval = interval_;
    }
    live_.emplace(b->addr, b);
    // The levels return to where they stood before the free: the peaks and the phase book already
    // hold them (block_books.hpp); the pair's sums wait in the batch.
    const auto size = static_cast<std::int64_t>(b->bytes);
    shift_block_levels(stats_, b->seg->small, +1, size, static_cast<std::int64_t>(bytes));
    pairs_.add(b->seg->small, size, static_cast<std::int64_t>(bytes));
    ++phases_.current_stats().num_allocs;
    emit(trace_op::alloc, b->addr, bytes, b->bytes, stream, tag);
    if (options_.check_invariants) check_or_abort();
    return b->addr;
  }
  /// Frees live block b (taken out of the live table, no stream uses, deferrable) by deferring it.
  void free_deferred(block* b, device_address addr) {
    shift_block_levels(stats_, b->seg->small, -1, static_cast<std::int64_t>(b->bytes),
                       static_cast<std::int64_t>(b->requested_bytes));
    defer(b);
    emit(trace_op::free_completed, addr, 0, b->bytes, b->seg->stream);
    if (options_.check_invariants) check_or_abort();  // levels only fell: nothing for the phase book
  }

 public:
  // --- the hot path (engine.cpp's note): what the facade tries before the full operation ---
  /// allocate() when it is the deferred block taken back for the request that took it last time
  /// (same size, least block size, stream and tag, nothing changed since); 0 when not, with nothing changed.
  device_address allocate_hot(std::size_t bytes, std::size_t place_bytes, stream_id stream, std::uint32_t tag) {
    if (deferred_ == nullptr || bytes != deferred_requested_ || !pending_.empty() || last_answer_.bytes != bytes ||
        last_answer_.place_bytes != place_bytes || last_answer_.stream != stream || last_answer_.tag != tag) {
      return 0;
    }
    block* b = take_deferred_again(stream, last_answer_.pool, last_answer_.rounded);
    return b != nullptr ? allocate_again(b, bytes, stream, tag) : 0;
  }
  /// deallocate() of a correct free that defers its block, with no deferred block to settle first;
  /// false when not, with nothing changed.
  bool deallocate_hot(device_address addr, std::size_t size_bytes) {
    if (deferred_ != nullptr) return false;
    block* b = live_.find(addr);
    if (b == nullptr || (size_bytes != 0 && size_bytes != b->requested_bytes) || !b->stream_uses.empty() ||
        !deferrable(b)) {
      return false;
    }
    live_.erase(addr);
    ++phases_.current_stats().num_frees;
    emit(trace_op::free_requested, addr, b->requested_bytes, b->bytes, b->seg->stream, b->tag);
    free_deferred(b, addr);
    return true;
  }

 private:
  void settle_deferred();
  /// The deferred block, when handing it to this request is what the eager books would do (best fit
  /// would choose it, merged, and split the request off its front, or take it whole); else settles
  /// and returns nullptr.
  block* take_deferred(stream_id stream, pool_id pool, std::size_t rounded);
  /// take_deferred's answer for the question it answered yes to last, while nothing changed.
  block* take_deferred_again(stream_id stream, pool_id pool, std::size_t rounded) noexcept {
    block* d = deferred_;
    block_pool& p = pools_[pool];
    if (d != last_hit_.deferred || d->addr != last_hit_.addr || p.version() != last_hit_.pool_version ||
        d->bytes != rounded || d->seg->pool != pool || d->seg->stream != stream) {
      return nullptr;
    }
    p.count_lookup();
    if (block* partner = d->next; partner != nullptr && partner->state == block_state::free && partner->event_count == 0) {
      partner->free_since = p.lookups();  // the remainder's re-insert
      partner->free_epoch = p.epoch();
    }
    deferred_ = nullptr;
    return d;
  }

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
  /// `new_reservation`: with no room in this pool and stream's reservations, add one (always so
  /// under growth_style::expandable_segments).
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
  /// Tells the sink, if it listens to `op` (one bit test otherwise).
  void emit(trace_op op, device_address addr, std::size_t requested, std::size_t bytes, stream_id stream,
            std::uint32_t tag = 0, std::string_view name = {}) {
    if ((sink_ops_ & trace_op_bit(op)) != 0) send(op, addr, requested, bytes, stream, tag, name);
  }
  void send(trace_op op, device_address addr, std::size_t requested, std::size_t bytes, stream_id stream,
            std::uint32_t tag, std::string_view name);
  bool is_small(pool_id pool) const { return pool_traits_[pool].small; }
  std::size_t limit() const { return options_.limit_bytes; }
  std::size_t largest_free_bytes() const;
  byte_levels levels() const {
    return {stats_.allocated_bytes[stat_type::all].current, stats_.reserved_bytes[stat_type::all].current,
            stats_.active_bytes[stat_type::all].current, stats_.requested_bytes[stat_type::all].current};
  }
  void count_device(std::int64_t device_stats::*global, std::int64_t phase_stats::*phase);
  /// An event recorded now on `stream` (a spare one, or a new one), to wait for the work enqueued
  /// there so far; nothing when the device could give or record none, after waiting for
  /// everything instead. Give it back to spare_events_ when done.
  std::optional<event_id> record_on(stream_id stream);
  /// Merges b with free neighbours of the same kind (free with no events, or unmapped);
  /// returns the surviving block. b must not be in a pool.
  block* merge_neighbours(block* b);
  void synchronize_pending();

  // --- same-address offload (engine_offload.cpp) ---
  /// free_block's end for a block of an offloaded range: offloaded_free, out of every pool; the
  /// range's last live block gone, its pages are unmapped (the host memory goes back).
  void free_offloaded(block* b);
  /// The offloaded range block b overlaps (b->offloaded).
  std::map<device_address, offloaded_range>::iterator range_of(const block* b);
  /// The first block of `r.seg` that overlaps `r`.
  block* first_block_in(const offloaded_range& r) const;
  /// Events recorded now on the streams that used the blocks overlapping [addr, end) from `first`:
  /// what a move of their bytes waits for. Given back with recycle_events.
  std::vector<event_id> events_for(const block* first, device_address end);
  /// The streams that used the blocks overlapping [addr, end) from `first`: their segment's and
  /// those recorded on them.
  std::vector<stream_id> streams_of(const block* first, device_address end) const;
  void recycle_events(const std::vector<event_id>& events);
  /// Moves range `it` back to device pages; out_of_memory leaves it as it was.
  /// non_blocking: the range stays in flight (a restore's) and `done.ticket` names the call.
  /// `lent`: the named blocks (sorted) whose copies options.copy_only narrows.
  errc restore_range(std::map<device_address, offloaded_range>::iterator it, offload_outcome& done, std::uint64_t call,
                     const move_options& options, std::span<const device_address> lent);
  /// The error a move finished outside a call that could report it left (then cleared), else the
  /// moves in flight whose copies are done, landed (offload and restore start with it).
  result<bool, offload_error> land_done_moves();

  /// Lands every move in flight (waiting for their copies when `wait`), keeping a failure for the
  /// next offload, restore or finish_moves to report (growth calls it: it cannot report one).
  void land_moves_quietly(bool wait);
  /// Finishes the move in flight of range `it` (waiting for its copies) and books it: an offload's
  /// pages become the host's (the range is dropped if its last live block went meanwhile); a
  /// restore's blocks come back to the pools. A failed offload finish puts the blocks back as they
  /// were (device pages, contents intact) and erases the range; a failed restore stays in flight.
  errc land(std::map<device_address, offloaded_range>::iterator it);
  /// Books range `it`, whose device pages went back, as offloaded.
  void book_offloaded(offloaded_range& r);
  /// The blocks of range `r` out of `offloaded` (a restore's end, or an offload undone); those
  /// freed while away become ordinary free blocks in their pools.
  void unflag_range(const offloaded_range& r);
  /// The error of a failed land() of the range [addr, +bytes).
  offload_error landing_error(const offloaded_range& r, errc e, const offload_outcome& done);
  /// The part of free block `b` (in its pool) inside [lo, hi), cut from it: out of the pool,
  /// offloaded_free; the parts outside stay in the pool.
  block* carve_free_edge(block* b, device_address lo, device_address hi);
  /// Unmaps range `it`, whose blocks are all offloaded_free, and books the pages as unmapped.
  void drop_range(std::map<device_address, offloaded_range>::iterator it);

  // --- release (engine_release.cpp) ---
  std::size_t run_step(const release_step& step);
  std::size_t release_segment(segment* seg);
  /// Unmaps the pages wholly inside free block b, at most about `limit_bytes` of them (the upper
  /// ones, which join the unmapped space above); returns the bytes unmapped (0 if none).
  std::size_t unmap_block_pages(block* b, std::size_t limit_bytes = SIZE_MAX);
  std::size_t page_bytes_of(const segment& seg) const;
};

}  // namespace phasealloc::detail
