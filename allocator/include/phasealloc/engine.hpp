// The caching engine: one per device. It asks its device for memory and its policy for
// decisions, keeps the books (segments, blocks, pools, pending cross-stream frees, per-phase
// stats) and tells an optional trace sink what happened.
//
// Thread-safe: every public method takes the engine's one (non-recursive) mutex; no public
// method calls another.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/device.hpp"
#include "phasealloc/oom_report.hpp"
#include "phasealloc/policy.hpp"
#include "phasealloc/snapshot.hpp"
#include "phasealloc/stats.hpp"
#include "phasealloc/status.hpp"
#include "phasealloc/trace_sink.hpp"

namespace phasealloc {

struct engine_options {
  /// Misuse (unknown pointer, double free, size mismatch) aborts with the evidence instead of
  /// being reported and counted. On in every test.
  bool strict = false;
  /// Run the invariant checker after every operation and abort on a violation (tests).
  bool check_invariants = false;
  /// Limit on reserved bytes (0 = the device's capacity): torch's per-process memory fraction.
  std::size_t limit_bytes = 0;
  /// Defer the merge of a freed block to the next operation, so that allocating it again costs no
  /// split and no merge (the hot path). Every decision and every book reads the same either way;
  /// off only for the tests that check exactly that.
  bool defer_frees = true;
  /// Most bytes of pages offloaded at once (0: no limit but the host's): an offload that would
  /// hold more leaves the rest on the device, with an error naming the budget.
  std::size_t offload_host_budget_bytes = 0;
};

/// Current bytes, all pools.
struct memory_levels {
  std::size_t allocated_bytes = 0;
  std::size_t reserved_bytes = 0;
  std::size_t active_bytes = 0;
  std::size_t requested_bytes = 0;
};

/// Why an allocation failed: the code and, for out of memory, the report users read.
struct alloc_error {
  errc code = errc::out_of_memory;
  oom_report report;
};

/// One misuse, as reported to the misuse handler and kept as the last misuse.
struct misuse_report {
  errc code = errc::ok;
  device_address addr = 0;
  std::size_t size_bytes = 0;       ///< Size the caller passed (0 when unknown).
  std::size_t expected_bytes = 0;   ///< Size the engine knows for that block (0 when none).
  std::string message;              ///< Human-readable evidence.
};

/// The limit on reserved bytes that a memory fraction (torch's per-process memory fraction) gives
/// on a device of `capacity_bytes`: 0 (no limit) for 1.0. An error, naming the fraction, for a
/// fraction outside (0, 1] (NaN included) or one that leaves less than one byte of the device,
/// which must never read as "no limit".
result<std::size_t, std::string> memory_limit_bytes(double fraction, std::size_t capacity_bytes);

/// What an offload or a restore did.
struct offload_outcome {
  std::size_t blocks = 0;        ///< Blocks named that were moved (wholly or in part).
  std::size_t ranges = 0;        ///< Page ranges moved (adjacent blocks share one).
  std::size_t page_bytes = 0;    ///< Bytes of pages whose memory changed sides.
  std::size_t copied_bytes = 0;  ///< Live bytes copied (never free cached bytes).
  std::size_t kept_bytes = 0;    ///< Offload: bytes of the named blocks that stayed (pages shared with blocks that stay).
  /// A non-blocking call whose copies are in flight: the ticket finish_moves and
  /// order_after_moves take (0: nothing in flight, the call did all it did).
  std::uint64_t ticket = 0;
};

/// How an offload or a restore moves its blocks.
struct move_options {
  /// Return once the copies are enqueued (offload_outcome::ticket names them); see offload().
  bool non_blocking = false;
  /// When set: the only bytes of the named blocks that hold values (address order, not
  /// overlapping; none: nothing to copy), the rest being free space of an allocator the blocks were
  /// lent to (a CUDA graph pool's segments lent to PyTorch's allocator): only the live bytes inside
  /// them are copied. Other blocks a moved range holds are copied whole.
  std::optional<std::span<const byte_range>> copy_only = std::nullopt;
};

/// Why an offload or a restore stopped, and what it had done before.
struct offload_error {
  errc code = errc::invalid_argument;
  std::string message;  ///< Names the block or range and what was wrong.
  offload_outcome done;
};

/// A block of a seed_segment, in address order.
struct seed_block {
  std::size_t bytes = 0;
  block_state state = block_state::free;  ///< allocated, free or unmapped (pending_free reads as free).
  std::size_t requested_bytes = 0;        ///< allocated: the caller's size.
};

/// A segment that existed before the engine's history began (a replay seeded from a snapshot).
struct seed_segment {
  stream_id stream = 0;
  bool small = false;       ///< Of the policy's small pool.
  bool expandable = false;  ///< An expandable reservation: its blocks span it from its first mapped byte.
  std::vector<seed_block> blocks;
};

namespace detail {
class engine_impl;
}

class engine {
 public:
  engine(device& dev, policy& pol, engine_options options = {});
  ~engine();
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // --- allocation ------------------------------------------------------------------------------
  /// Allocates `bytes` for use on `stream`. Zero bytes gives a valid unique block of the minimum size.
  /// A request larger than the device's capacity is out of memory (never rounded, never an abort).
  /// `min_block_bytes`, for a caller that sizes requests its own way: the block holds at least that
  /// many bytes (the policy rounds and places max(bytes, min_block_bytes)), while `bytes` stays the
  /// requested size (requested_bytes, the size a free may name, the trace, the policy's request).
  result<device_address, alloc_error> allocate(std::size_t bytes, stream_id stream, std::uint32_t tag = 0,
                                               std::size_t min_block_bytes = 0);
  /// Frees a block. `size_bytes` (0 = unchecked) must equal the requested size of the allocation.
  /// Misuse returns its code (and aborts in strict mode); the engine's books are never touched by it.
  errc deallocate(device_address addr, std::size_t size_bytes = 0);
  /// Notes that `stream` used the block at `addr`: a later free waits for that stream's work.
  errc record_stream(device_address addr, stream_id stream);
  /// Returns every cached byte the device can take back (torch.cuda.empty_cache()).
  void empty_cache();
  /// Runs a release plan now (tools, tests, and the interpose layer's explicit release).
  std::size_t release(const release_plan& plan);

  /// Books `segments` as if they had been made before: each reserved (and mapped) on the device,
  /// split into its blocks; allocated blocks become live, free ones cached in the pool the policy
  /// has for that kind (small or not, expandable or not; the first of that smallness otherwise; an
  /// expandable segment in a pool that is not becomes one segment per mapped run). No device call is
  /// counted and no policy hook is asked. Only on an engine that holds no segment yet. Returns the
  /// addresses of the allocated blocks in order, or why the layout cannot be booked.
  result<std::vector<device_address>, std::string> seed(const std::vector<seed_segment>& segments);

  // --- same-address offload (engine_offload.cpp; needs device caps().has_host_backing) ----------
  /// Moves the live bytes of the allocated blocks at `addrs` to host memory mapped at the same
  /// addresses, and gives their device pages back: every page covered only by blocks named here
  /// (a page shared with a block that stays, stays; offload_outcome::kept_bytes). A kernel that
  /// touches an offloaded block reads and writes its bytes over the link. Blocks already offloaded
  /// are left as they are. An unknown address, a device without host backing or a capture under
  /// way is an error naming it, before anything moves.
  ///
  /// `options.non_blocking`: each range's copies are enqueued and the call returns (outcome.ticket names
  /// them). An offload's device pages go back when its copies are done and the move is finished:
  /// by finish_moves, by any offload or restore call that finds them done, or by an allocation
  /// that would otherwise run out of memory (it waits for them). Until then the blocks must not
  /// be written (their bytes are being read; reads are fine: the finish waits for the streams that
  /// used them before it changes the mapping), and their pages count in reserved_bytes.
  result<offload_outcome, offload_error> offload(std::span<const device_address> addrs, const move_options& options = {});
  /// Brings back to device pages, at the same addresses, every offloaded range holding a block at
  /// `addrs` (all of them when `addrs` is empty). Out of device memory, after the engine released
  /// what it caches, leaves the rest on the host (still correct) and is an out_of_memory error:
  /// nothing is lost, and a later restore may succeed. Refused while a capture is under way.
  ///
  /// `options.non_blocking`: the device pages are mapped (and counted) at once and the copies enqueued;
  /// the streams that used the blocks (their segment's, those recorded on them) are made to wait
  /// for the copies on the device; work on another stream must be ordered after them
  /// (order_after_moves) or wait for them (finish_moves). A block freed meanwhile is reused only
  /// after its range's copies are done.
  result<offload_outcome, offload_error> restore(std::span<const device_address> addrs, const move_options& options = {});
  /// offload() of every allocated block carrying `tag` (allocate's tag; not 0), under one lock: a
  /// block allocated or freed on another thread meanwhile is either named or not, never half.
  result<offload_outcome, offload_error> offload_tagged(std::uint32_t tag, const move_options& options = {});
  /// restore() of every offloaded range holding a block that carries `tag`; nothing when none does.
  result<offload_outcome, offload_error> restore_tagged(std::uint32_t tag, const move_options& options = {});
  /// Bytes of the allocated blocks carrying `tag` (offloaded ones included): what offload_tagged
  /// would move at most. A walk over the live blocks.
  std::size_t tagged_bytes(std::uint32_t tag) const;
  /// Finishes the moves in flight of `ticket` (0: every one): all of them, waiting for their copies,
  /// when `wait`; else those whose copies are done. Answers whether none of them is left in flight.
  /// An offload whose finish fails leaves its blocks on the device, contents intact (the error
  /// names them); a restore whose copies cannot be waited for stays in flight.
  result<bool, offload_error> finish_moves(std::uint64_t ticket, bool wait);
  /// Makes `stream` wait, on the device, for the copies of the moves in flight of `ticket` (0:
  /// every one): kernels enqueued on it afterwards see restored bytes, without the host waiting.
  errc order_after_moves(std::uint64_t ticket, stream_id stream);

  // --- phases ----------------------------------------------------------------------------------
  /// Makes `name` the current phase, remembering the previous one for end_phase().
  phase_id begin_phase(std::string_view name);
  /// Returns to the phase that was current before the matching begin_phase().
  void end_phase();
  /// Replaces the current phase without nesting.
  phase_id set_phase(std::string_view name);
  std::string current_phase() const;

  // --- books -----------------------------------------------------------------------------------
  /// The four current byte levels (cheap: no walk over the pools, unlike stats()).
  memory_levels levels() const;
  device_stats stats() const;
  std::vector<phase_stats> phases() const;
  void reset_peak_stats();
  void reset_accumulated_stats();
  snapshot take_snapshot() const;
  misuse_report last_misuse() const;
  std::size_t limit_bytes() const;
  void set_limit_bytes(std::size_t limit_bytes);
  /// While held (a CUDA graph capture, or a pool route, is under way on the device) the engine
  /// makes no device call that would synchronise or free: release plans (phase transitions,
  /// empty_cache, before_grow, on_oom) are skipped, and frees waiting on events are not polled.
  /// Growing (reserve, map) goes on. PyTorch's allocator holds the same calls while a capture runs.
  void hold_device_calls(bool held);
  /// Lets GPU `peer` reach this engine's device memory, now and later (device::grant_peer_access).
  errc grant_peer_access(int peer);
  const policy& current_policy() const noexcept;
  const device& current_device() const noexcept;

  /// Every broken invariant, one line each (empty when the books are sound).
  std::vector<std::string> check_invariants() const;

  /// The sink must outlive the engine or be replaced by nullptr first.
  void set_trace_sink(trace_sink* sink);

 private:
  std::unique_ptr<detail::engine_impl> impl_;
};

}  // namespace phasealloc
