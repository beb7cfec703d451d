// The deferred merge: the last freed block waits, unmerged and out of its pool, for the next call.
//
// Design note
// Rationale: on the hot path (a tensor allocated and freed again and again) an eager engine splits
//   the request off a large free block and merges it back on every pair: four set updates, a
//   lookup and block objects made and recycled, ~45% of a pair's instructions. The
//   `pytorch` policy must keep PyTorch's decisions exactly, and phasealloc's policy table must not
//   move, so a cache that serves frees in another order than best fit would is not an option.
// Approach: a free (with no events to wait for, and no free block before it to merge with) marks
//   its block `free` and remembers it as deferred_ instead of merging it with the free block after
//   it (its partner) and inserting the union into the pool. The books then differ from the eager
//   ones in one place: the pool holds the partner instead of the union M = block + partner. The
//   next allocation asks the question best fit would have asked of the eager pool, exactly: the
//   smallest (size, address) on its stream of at least the rounded size, among the pool without
//   the partner plus M. When that answer is M, the policy accepts it (may_use), and the eager
//   engine would split the request off M's front (or hand M out whole when there is no partner),
//   the result of the eager path is the deferred block allocated and the partner back in the pool:
//   the books as they stand. The allocation takes the block, counts the lookup and stamps the
//   partner as the eager re-insert would have (free_since, free_epoch). Any other answer, and every
//   other operation, settles first: merges M and inserts it with the stamps of the free.
// Limitations: one deferred block (the pattern it serves is free-then-allocate of one size);
//   pools whose best fit ranks a block with the unmapped pages after it
//   (growth_style::expandable_segments) always merge at once; a block with a free block before
//   it merges at once (the eager split would then start at the earlier block's address).
#include "engine_impl.hpp"
#include "phasealloc/check.hpp"

namespace phasealloc::detail {
namespace {

bool free_and_idle(const block* n) {
  return n != nullptr && n->state == block_state::free && n->event_count == 0;
}

}  // namespace

void engine_impl::settle_deferred() {
  block* b = deferred_;
  deferred_ = nullptr;
  live_bytes_by_interval_[b->birth_interval] -= b->bytes;
  add_block_freed(stats_, b->seg->small, 1, static_cast<std::int64_t>(b->bytes),
                  static_cast<std::int64_t>(deferred_requested_));
  const std::uint64_t since = b->free_since;
  const std::uint64_t epoch = b->free_epoch;
  b = merge_neighbours(b);
  block_pool& pool = pools_[b->seg->pool];
  pool.insert(b);
  b->free_since = since;  // as inserted at the free
  b->free_epoch = epoch;
}

block* engine_impl::take_deferred(stream_id stream, pool_id pool, std::size_t rounded) {
  if (block* d = take_deferred_again(stream, pool, rounded)) return d;
  block* d = deferred_;
  if (d->seg->pool == pool && d->seg->stream == stream && d->bytes == rounded) {
    block* partner = free_and_idle(d->next) ? d->next : nullptr;
    block_pool& p = pools_[pool];
    // Best fit over the eager pool: the pool without the partner, plus the merged block.
    const std::size_t merged_bytes = d->bytes + (partner != nullptr ? partner->bytes : 0);
    const block* other = p.first_fit(stream, rounded, partner);
    const bool merged_wins = other == nullptr || other->bytes > merged_bytes ||
                             (other->bytes == merged_bytes && ranks_before(d, other));
    if (merged_wins && policy_.may_use(pool, merged_bytes, rounded)) {
      const bool split = merged_bytes > rounded && policy_.should_split(pool, merged_bytes, rounded);
      if (partner == nullptr || split) {
        last_hit_ = {p.version(), d, d->addr};
        return take_deferred_again(stream, pool, rounded);
      }
    }
  }
  settle_deferred();
  return nullptr;
}

}  // namespace phasealloc::detail
