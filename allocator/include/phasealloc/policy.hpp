// The policy contract: every decision the engine does not make itself.
//
// The engine (mechanism) keeps the books; a policy (decisions) answers: how to round a request,
// which pool serves it, how big a new segment is, whether a free block may serve it and be split,
// and what to release before growing, after the device refused to grow, and at a phase
// transition. All calls happen under the engine's lock, one at a time, so a policy may keep
// state (e.g. what each phase needed last iteration) without locking of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/types.hpp"

namespace phasealloc {

/// How an expandable pool grows. The engine has one growth path (engine_grow.cpp); the style picks
/// the decisions along it.
enum class growth_style {
  /// phasealloc's page-wise growth (the default):
  ///   - best fit takes the smallest free block that fits (exact-size bins, deferred merges);
  ///   - growth finds room in an unmapped run together with the free block just before it, unless
  ///     that block alone holds the request (best fit's may_use refused it; growing into it would
  ///     hand it out anyway);
  ///   - a new reservation is made only for the first one, or as the last resort once the on_oom
  ///     plan failed (live blocks sit in the holes);
  ///   - the memory limit is checked against the pages each map adds (a map-ahead that would pass
  ///     the limit maps only what is needed).
  pages,
  /// PyTorch's expandable segments (CUDACachingAllocator's get_free_block, find_expandable_block,
  /// try_allocate_expandable_block):
  ///   - a free block followed by unmapped pages of its reservation ranks by its size plus theirs
  ///     (it can grow in place), and the search walks on from the smallest fit to the next larger
  ///     block while that one ranks smaller (the pool keeps every free block in its ordered index, no
  ///     exact-size bins, and a free merges at once: host time);
  ///   - growth takes the run, the free block before it (counted even when it holds the request
  ///     alone) and the chain of free and unmapped blocks after it, mapping the chain's runs in
  ///     address order until the merged block holds the request;
  ///   - when no reservation of the pool and stream has room, one is made at once, before any
  ///     release step;
  ///   - the memory limit is checked once per growth, against segment_bytes(pool, rounded), whatever
  ///     is mapped then (mapped bytes may pass the limit by part of a page).
  expandable_segments,
};

/// What the engine needs to know about one pool.
struct pool_traits {
  std::string name;           ///< "small", "large", "kv", ...: appears in stats and reports.
  bool small = false;         ///< Counted under torch's small_pool stats (else large_pool).
  bool expandable = false;    ///< Grow by mapping pages into one reservation per stream (needs a
                              ///< device with virtual reserve and partial unmap).
  std::size_t page_bytes = 0; ///< Expandable pools: mapping unit (a multiple of the granularity).
  bool pinned = false;        ///< Memory of this pool is never returned by transition releases.
  std::size_t grow_bytes = 0; ///< Expandable pools: map at least this much per growth (fewer
                              ///< device calls, at most this much mapped ahead; 0 = one page).
  /// Expandable pools: the growth decisions (expandable_segments' ranking of free blocks also holds
  /// where the device has no virtual memory and the pool is served with whole segments).
  growth_style growth = growth_style::pages;
  /// Best fit breaks ties between equal-size free blocks (same stream) by the age of their segment,
  /// oldest first (a counter taken at each new segment or reservation, inherited by its blocks),
  /// then by address. Off: by address alone. The release orders that walk the size index
  /// (size_index, aged, best_fit_then_largest) follow the same order.
  bool segment_age_order = false;
};

/// Where in its pool a request is placed.
enum class placement {
  best_fit,        ///< The smallest free block that fits (PyTorch's rule); growth when none does.
  lowest_address,  ///< The lowest-address free block that fits, so blocks placed this way pack at
                   ///< the bottom of their reservation, below the best-fit ones (lifetime placement).
};

struct alloc_request {
  std::size_t requested_bytes = 0;
  stream_id stream = 0;
  phase_id phase = unphased;
  std::uint32_t tag = 0;  ///< Optional caller tag (0 = none), e.g. "offloaded parameter chunk".
};

/// Which cached memory to give back to the device, and how much.
enum class release_what {
  free_segments,  ///< Whole segments with no allocated or pending block (cudaFree, or unmap+release).
  free_pages,     ///< Every granule wholly inside a free block is unmapped (virtual-memory devices).
};

enum class release_order {
  address,             ///< In address order until the target is met.
  largest_first,       ///< Largest segments (or free page runs) first: most bytes per call.
  smallest_first,      ///< Smallest first: keeps the large runs a later request can reuse.
  best_fit_then_largest,  ///< The smallest single segment >= target if there is one (first in the
                          ///< size index among equals), else largest first (the size index backwards).
  aged,                ///< Segments cached at least as long as the mean first, repeatedly (PyTorch's
                       ///< garbage_collection_threshold); age counts allocations since it became free.
                       ///< Within a pass, in size-index order.
  size_index,          ///< Pool by pool (release_step::pool_order), each in the order of its
                       ///< free-block index: stream, then size, then age rank (segment_age_order),
                       ///< then address, the order PyTorch's release_blocks walks its block sets
                       ///< (free page runs alike, by block).
};

struct release_step {
  release_what what = release_what::free_segments;
  std::optional<pool_id> pool;          ///< Only this pool (nullopt: every pool).
  std::optional<stream_id> stream;      ///< Only segments of this stream (nullopt: every stream).
  bool include_pinned = false;          ///< Also pools marked pinned.
  std::size_t min_segment_bytes = 0;    ///< Only segments at least this large.
  std::size_t min_run_bytes = 0;        ///< free_pages: only free page runs at least this large
                                        ///< (bounds the number of unmap calls).
  /// free_pages: runs of blocks free since before the current phase began (left over by an
  /// earlier phase and not reused since: dead weight, not this phase's working set) qualify from
  /// this size instead (0: no exception).
  std::size_t stale_min_run_bytes = 0;
  std::size_t target_bytes = SIZE_MAX;  ///< Stop once this many bytes were released.
  release_order order = release_order::address;
  bool synchronize = false;             ///< First wait for pending cross-stream frees to complete.
  /// on_oom only: what follows the step (the defaults: search the pool, then grow, a counted retry).
  struct retry_rule {
    /// Retry only if the step released at least target_bytes (else go on to the next step).
    bool only_if_target_met = false;
    /// The retry counts in num_alloc_retries, whether it succeeds or not.
    bool counted = true;
    /// Search the pool before growing again (a step that waited for pending frees may have made a
    /// fitting block free). Off: grow at once.
    bool search_pool_first = true;
  };
  retry_rule retry{};
  /// An expandable reservation this step leaves with no memory mapped is released too (a policy
  /// that regrows soon keeps it and saves two device calls).
  bool release_empty_reservations = false;
  /// size_index only: the pools in the order they are released (empty: pool id order); a pool not
  /// listed comes after the listed ones, in id order.
  std::vector<pool_id> pool_order;
};

using release_plan = std::vector<release_step>;

/// State offered to before_grow and on_oom.
struct grow_context {
  alloc_request request;
  std::size_t rounded_bytes = 0;
  pool_id pool = 0;
  std::size_t grow_bytes = 0;      ///< Size of the segment (or, for an expandable pool, at most
                                   ///< the pages) the engine wants to add.
  std::size_t reserved_bytes = 0;  ///< Reserved now (mapped bytes).
  std::size_t allocated_bytes = 0;
  std::size_t capacity_bytes = 0;  ///< Device capacity.
  std::size_t limit_bytes = 0;     ///< Memory-fraction limit on reserved bytes (0 = none).
};

/// A block still allocated at a phase transition, with the interval it was made in: what a policy
/// that places blocks by lifetime learns from (which requests outlive their interval, and which
/// outlive the next interval of the same phase).
struct live_block {
  std::size_t requested_bytes = 0;
  std::size_t bytes = 0;  ///< The block's size.
  stream_id stream = 0;
  pool_id pool = 0;
  std::uint32_t tag = 0;
  std::uint32_t birth_interval = 0;  ///< transition_context::interval of the interval it was made in.
};

/// State offered at a phase transition: the interval that just ended and the one that starts.
struct transition_context {
  phase_id from = unphased;
  phase_id to = unphased;
  std::string_view from_name;
  std::string_view to_name;
  std::size_t reserved_bytes = 0;
  std::size_t allocated_bytes = 0;
  std::size_t interval_peak_allocated_bytes = 0;  ///< Peak allocated during the interval that ended.
  std::size_t interval_peak_reserved_bytes = 0;
  std::size_t capacity_bytes = 0;
  /// The interval that ends: intervals are numbered from 0 (the first, before any transition), one
  /// more at every transition, also into the same phase.
  std::uint32_t interval = 0;
  /// Every allocated block, in no particular order; filled only for a policy whose
  /// wants_live_blocks() is true (the engine walks its live table for it).
  std::span<const live_block> live_blocks;
  /// The bytes (block sizes) of the blocks allocated now, by the interval they were made in
  /// (index: live_block::birth_interval; up to and including `interval`). Always filled: the engine
  /// keeps these sums as blocks come and go, so reading them costs nothing per live block.
  std::span<const std::size_t> live_bytes_by_interval;
};

class policy {
 public:
  virtual ~policy() = default;

  /// The spec this policy was built from, with its effective configuration ("pytorch:...").
  virtual std::string spec() const = 0;
  virtual std::span<const pool_traits> pools() const noexcept = 0;

  virtual std::size_t round_bytes(std::size_t requested_bytes) const noexcept = 0;
  virtual pool_id pool_for(const alloc_request& request, std::size_t rounded_bytes) const noexcept = 0;
  /// Where in the pool the request goes. Asked with pool_for; a best-fit answer is cached with
  /// pool_for's (same invalidation: a policy hook that may change the policy's state), a
  /// lowest-address one is asked again for the next request. Default: best fit.
  virtual placement placement_for(const alloc_request& /*request*/, std::size_t /*rounded_bytes*/) const noexcept {
    return placement::best_fit;
  }
  /// Size of a new segment for a rounded request in a non-expandable pool (the engine rounds it
  /// up to the device granularity).
  virtual std::size_t segment_bytes(pool_id pool, std::size_t rounded_bytes) const noexcept = 0;
  /// Whether a cached free block of block_bytes may serve the request (oversize rules).
  virtual bool may_use(pool_id /*pool*/, std::size_t /*block_bytes*/, std::size_t /*rounded_bytes*/) const noexcept {
    return true;
  }
  /// Whether to split block_bytes into the request and a free remainder.
  virtual bool should_split(pool_id pool, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept = 0;

  /// Whether the policy models the allocator traces are recorded under (PyTorch's caching
  /// allocator). A replay of such a policy starts from the layout the recording found (the
  /// segments a snapshot or profiler trace began with), and its levels are compared with the
  /// recording's; other policies start empty, and their gaps to the recording are their savings.
  virtual bool models_recorded_allocator() const noexcept { return false; }

  /// Fraction of the device's capacity the engine may reserve (torch's per_process_memory_fraction);
  /// applied when the engine is built without an explicit limit. Default: all of it.
  virtual double memory_fraction() const noexcept { return 1.0; }

  /// Before the engine grows: what to release first. Default: nothing.
  virtual release_plan before_grow(const grow_context& /*context*/) { return {}; }
  /// Expandable pools: how much to map when growing (at least what the request lacks is mapped).
  /// Default: the pool's grow_bytes.
  virtual std::size_t map_ahead_bytes(const grow_context& context) const { return pools()[context.pool].grow_bytes; }
  /// After the device refused to grow: the steps to try, each followed by one retry.
  virtual release_plan on_oom(const grow_context& context) = 0;
  /// Whether on_transition wants transition_context::live_blocks. Default: no.
  virtual bool wants_live_blocks() const noexcept { return false; }
  /// At a phase transition: what to release. Default: nothing.
  virtual release_plan on_transition(const transition_context& /*context*/) { return {}; }
  /// Before a restore maps `bytes` of device pages under offloaded ranges (which come back at their
  /// own addresses, so cached free memory cannot serve them): what to give back first. Default:
  /// free pages, largest runs first, up to `bytes`, so the restore does not add to the cache.
  virtual release_plan before_restore(std::size_t bytes) {
    release_step pages;
    pages.what = release_what::free_pages;
    pages.order = release_order::largest_first;
    pages.target_bytes = bytes;
    return {pages};
  }
  /// When a caller asks for the cache back (torch.cuda.empty_cache()). Default: every cached
  /// segment of every pool but the pinned ones, after waiting for pending frees.
  virtual release_plan on_empty_cache() {
    release_step all;
    all.synchronize = true;
    return {all};
  }
};

}  // namespace phasealloc
