// `phasealloc`: the phase-aware policy, phasealloc's default.
//
// What it does (keys in the PHASEALLOC_CONF / --policy grammar, defaults in brackets):
//   release:none|all|adaptive [adaptive]  At a phase transition, return cached memory. `all`
//       unmaps every free page (what hand-placed empty_cache() does, page-granular); `adaptive`
//       keeps what the phase that starts needed at its peak the last time it ran, and releases
//       the rest, so the next phase does not pay to grow back. A phase seen for the first time has
//       no prediction: its cache is kept. What a phase needs is its allocated peak, or, once it has
//       run from a trimmed cache, the reserved peak it reached then (its own fragmentation).
//   release_threshold:BYTES [1GiB]  Skip a transition release smaller than this (saves calls).
//   reclaim:BOOL [true]  Before growing past the highest reserved level of the run so far (the
//       peak that counts), first unmap free page runs (holes between live blocks), so growth
//       reuses their memory instead of adding to it: holes never block a large allocation.
//   reclaim_min_run:BYTES [128MiB]  Holes smaller than this stay mapped (bounds unmap calls),
//       unless an earlier phase left them and the current phase has not reused them: those are
//       dead weight, not working set, and go from one page up (no churn: the current phase's own
//       holes are never taken at that size).
//   page:BYTES [2MiB]  Mapping and unmapping unit of the pools (a multiple of the granularity).
//   grow:BYTES [20MiB]  Map at least this much per growth of the large pools: fewer map calls, at
//       most this much mapped ahead of need (PyTorch's expandable segments grow by 20 MiB pages).
//   grow_whole:BOOL [false]  A growth maps a whole multiple of `grow` (`small_grow` in the small
//       pool), as expandable segments map whole 20 MiB pages, instead of max(request, grow) rounded
//       to a page: the rest of the last step stays free for the next requests (half a step on
//       average instead of less than a page), so a run of allocations maps less often. Off by
//       default: it meets the calls target on 3 more traces and loses the peak and waste targets
//       on one (design note below).
//   small_grow:BYTES [4MiB]  Map at least this much per growth of the small pool (0: one page).
//       Mechanism: the small pool's pages are returned with the rest (transition release, and hole
//       reclaim, which takes pages an earlier phase left from one page up), and PyTorch's never
//       are; regrowing them one 2 MiB page per map call made the small pool most of the extra
//       device calls on jobs with many small long-lived tensors (LoRA adapters, their grads and
//       optimizer states). Two pages per growth halve those calls; the unused part at the peak is
//       at most one page more than page-by-page growth.
//   map_ahead:BOOL [true]  A phase that grows back toward what it needed last time (after a
//       transition release) maps up to 16 times the request per call, up to that need and never
//       past the run's high-water mark: regrowth costs a few calls, not one per `grow` step.
//   need_from_entry:BOOL [true]  What a phase needs is predicted from what it added last time to
//       the memory allocated when it began (its peak, as below, less that entry level), on top of
//       what is allocated when it begins again; off: its absolute peak of last time. Mechanism:
//       what a phase begins with changes between steps (rollout buffers, gradients and states kept
//       from the step before, reference outputs), and the absolute peak then under- or over-keeps;
//       what the phase itself adds is what repeats (design note below).
//   keep_for_step:BOOL [false]  At a transition within a step (not into the phase the job's cycle
//       begins with), also keep what the phases still to come in this step needed last step, so
//       that none of them maps again what the release would unmap. Off by default: on the target
//       traces the default already makes almost no such release (design note below).
//   lifetime:BOOL [false]  Placement by lifetime: requests predicted to outlive their phase
//       interval go to the lowest-address free block that fits (placement::lowest_address) instead
//       of the best fit, so they pack at the bottom of their pool, below the short-lived blocks,
//       and the memory the short-lived leave at the phase end is one run above them (one unmap
//       call, no page pinned between them). Off by default: on the real-code traces and presets it
//       gains no target and loses some (design note below).
//   phase_pools:BOOL [false]  Large allocations made in a rollout phase get a pool of their own
//       ("rollout"), so generation's short-lived blocks (KV caches, logits) never share pages with
//       state allocated in training; at the end of the rollout its pages empty out whole. Off by
//       default: page-granular release already returns most of what interleaving pins (on the
//       presets it moves the peak by at most 0.1 GiB), and two pools cost remapping calls when
//       memory moves between them (bench/README.md).
//   rollout_phases:[NAME,...] [generation,inference]  Phases served by the rollout pool.
//   pin_tags:[T,...] []  Allocation tags served by the pinned pool (e.g. offloaded parameter and
//       optimizer chunks reloaded every iteration): its memory is never released at transitions,
//       so every reload lands in the same slots without fragmenting the rest.
//   pin_sizes:[BYTES,...] []  Request sizes served by the pinned pool (for untagged jobs).
//   The first 15 tags a job names (phasealloc.tag("name"); types.hpp: named_tag_base) get a pool
//       each ("named tag N"), released like the large pool: such a block never shares a page with
//       a block of another tag or of none, so same-address offload of a tag moves whole pages and
//       keeps nothing on the device. Later names, and a trace's own categories (lower tags), share
//       the untagged pools. Blocks of a tag's pool count as large-pool blocks in the stats.
//   memory_fraction:F [1]  Share of the device the engine may reserve.
//
// Design note
// Rationale: PyTorch's allocator caches whatever a phase freed; in RLHF the next phase needs other
//   sizes, so the cache is dead weight on top of the next phase's peak (Zhou et al. measured ~25%
//   of memory). Hand-placed empty_cache() returns only whole unsplit segments; expandable_segments
//   grows compactly but never shrinks. Here every pool grows by pages (expandable, on a CUDA VMM
//   device) and shrinks by pages: at transitions (what the next phase will not use) and before
//   growing (holes first). Reserved memory tracks live memory within a page per hole.
// Approach: the engine does the mechanism (release steps over free page runs, largest first);
//   this class only decides when and how much, learning per phase name the peak allocated bytes
//   of its last interval.
// Defaults: chosen on the four synthetic PPO presets (phasealloc sweep, see bench/README.md) for
//   peak reserved within ~1.5% of the floor at the fewest device calls; smaller thresholds and
//   runs trade calls for a lower peak, `release:none` trades phase awareness for calls.
// Lifetime placement (lifetime:true)
// Rationale: a block that outlives its phase interval (weights, gradients kept for the optimizer,
//   optimizer state, LoRA adapters) pins the pages it shares with blocks that die at the phase end;
//   packed together, away from those, the short-lived memory empties in whole runs.
// Approach: learned online, per phase name, from what the engine reports at each transition
//   (transition_context::live_blocks: every allocated block with the interval it was made in). A
//   request's key is (rounded size, stream) within the phase it is made in. A visit of a phase is
//   its run of consecutive intervals (micro-batches continue it). At the end of a visit, the keys
//   of the blocks it made that are still allocated are the phase's `survived` keys; when the phase
//   starts again, those of its last visit's blocks still allocated then outlived the whole cycle
//   (`long_lived`), the other survivors did not (`mid_lived`: gradients, rollout buffers, states
//   moved in for one step). Both go to the lowest-address fit; everything made
//   before the first phase (model load) too. No size, phase name or count is a constant of a trace.
//   Tried first: pools of their own for long- and mid-lived keys (small and large, or small only).
// Limitations (measured, `phasealloc replay` of the 8 real-code traces and 4 presets; the four
//   targets of bench/README.md "Where the targets stand", met on removed/peak/calls/generating):
//   default 6/10/4/12; lifetime:true (long and mid lowest-address) 5/9/3/12, gpt2-small's waste
//   38 -> 250 MiB and small-offload-optimizer's 76 -> 134 MiB: gradients packed low take holes that
//   best fit kept for the next layer's activations, so backward grows more; long-lived only (and
//   model load) 6/10/4/12, every trace within 6 MiB of the default: with page-granular release and
//   hole reclaim, where a block sits within a pool hardly matters. Separate pools cost more than
//   they save: within a phase, memory moves between the classes (activations freed while
//   gradients are made), and a hole of one pool serves another only after an unmap and a map;
//   long/mid pools for both classes: waste removed 1/12 (ppo-gpt2-1.3b 367 MiB -> 3.4 GiB), for the
//   small class only 6/9/2/12 (small-lora 33 -> 47 MiB, llama-7b-lora 261 -> 455 MiB). Most
//   long-lived bytes are made in a phase's first interval (model load, the first optimizer step's
//   state), which has no history; the key cannot tell a long-lived block from a short-lived one of
//   the same size and phase (the k-th allocation of a size would, but the engine's answer cache
//   asks the policy once per distinct request, not per allocation).
// Need from the entry level (need_from_entry:true)
// Rationale: the adaptive release keeps what the phase that starts needs, and map_ahead regrows
//   toward it; both predicted it as the phase's absolute peak of last time. What a phase begins
//   with moves between steps (the rollout and reference outputs kept from the step before,
//   gradients or states held across it), so the absolute peak keeps too little (the phase regrows,
//   one map per hole or per `grow` step, and the release had unmapped it for nothing) or too much.
//   What the phase itself adds on top of what it begins with is what repeats.
// Approach: each learned need also records what was allocated when its interval began
//   (phase_need::entry_allocated_bytes); the need of a phase that begins is what is allocated now
//   plus what it added last time (growth_bytes: bytes() less its entry level), for the release,
//   the ping-pong keep and map_ahead's target alike. What that interval made and still holds when
//   the phase begins again (weights loaded in a phase's first interval, state kept across the
//   step) is in both terms, so it is subtracted once (need_from; the engine keeps the bytes of
//   the live blocks per interval they were made in, transition_context::live_bytes_by_interval).
//   Not for the
//   ping-pong keep (the phase that ends comes back after one short interval): there what it holds
//   is typically freed and made again by it (gradients consumed by the optimizer), and subtracting
//   it cost calls (ppo-gpt2-1.3b 1.42 -> 1.51x, offload-reference 1.54 -> 1.65x). Scenario tests:
//   NeedFromEntryPredictsWhatAPhaseAddsToWhatItBeginsWith, NeedFromEntryCountsWhatAPhaseMadeAnd-
//   StillHoldsOnce (without the subtraction it keeps 1 GiB instead of the 512 MiB of weights;
//   replay_colocate_test's actor then keeps 4 GiB and the rollout engine runs out of memory).
//   No size or phase name is a constant. Cost: none per live block at a transition (the engine's
//   sums move with each allocation and free; bench/transition_bench.cpp).
// Limitations (measured on the 8 real-code traces and 4 presets, `phasealloc replay` and
//   bench/policy_table.py --ours; figures before the held bytes were subtracted, which moved calls
//   by at most 0.04x: synth 1.3b 1.32 -> 1.36x, ppo-125m 1.18 -> 1.20x, ppo-7b 1.47 -> 1.45x):
//   device calls against native, need_from_entry:false -> true:
//   synth 1.3b 1.72 -> 1.32x (1,647 -> 1,266 calls), grpo-1.3b 1.51 -> 1.33x, grpo-small 2.02 ->
//   1.74x, gpt2-small 1.58 -> 1.45x, offload-reference 1.65 -> 1.55x, gpt2-1.3b 1.48 -> 1.43x,
//   ppo-125m 1.28 -> 1.18x, small-lora 1.27 -> 1.25x, llama-7b-lora 1.15 -> 1.14x; ppo-7b 1.45 ->
//   1.47x, small-offload-optimizer and 1.3b-offload unchanged. Peak lower on 5 traces (by up to
//   44 MiB), 4 MiB higher on ppo-125m, the same on 6; waste removed the same or higher but ppo-125m
//   96 -> 95% (synth 1.3b 79 -> 81%, grpo-1.3b 95 -> 97%), reserved while generating at most 0.007
//   higher against ES. The targets met stay 6/10/4/12 (synth 1.3b and grpo-1.3b miss 1.3x by
//   about 20 calls each). The default since then: it loses no target and cuts the calls that the
//   release-and-regrow of a phase whose entry level moves costs (the mechanism above), which is
//   how every RLHF step's rollout-to-training hand-off behaves. The kept bytes are the smaller runs
//   left by a largest-first release, so a phase can still map a few pages its blocks do not fit
//   in; keeping its need in the largest run instead (unmapping more of the smaller ones) cost more
//   calls than it saved (6/9/2/12, tried and reverted).
// What the waste at the peak is (measured with `phasealloc replay --explain-peak`, which sorts the
//   mapped bytes that are not allocated at the peaks into slivers in pages shared with live blocks,
//   holes and edges; bench/README.md "Where the waste is at the peak"): on the 1.3B traces mostly
//   slivers (synth 1.3b 289 MiB in 311 pages, as many under expandable segments: best fit's layout,
//   which no release rule can return at page granularity), on llama-7b-lora empty small-pool pages
//   (180-210 MiB an earlier phase left, below the transition threshold and not taken by reclaim),
//   and edges a growth at a new peak maps beyond its request (`grow`, `small_grow`) while reclaim
//   unmaps only the request's pages. Tried and reverted, each trading device calls for the peak
//   (targets removed/peak/calls/generating, default 6/10/4/12): unmapping every stale free page
//   before a growth past the high-water mark 6/11/3/12 (gpt2-1.3b calls 1.42 -> 1.78x), small pool
//   only 6/10/3/12; reclaim sized by what the growth maps 6/11/3/12 (small-offload-optimizer calls
//   1.22 -> 1.89x), for the small pool only 6/10/4/12 and no target gained; no map-ahead past the
//   high-water mark 5/10/0/12 (calls up to 4.5x); a large growth at a new peak unmapping free
//   small-pool pages first 5/9/0/12.
// Whole grow steps (grow_whole:true)
// Rationale: in a run of allocations that grows the pool (the model load, the first step of each
//   phase), growth by max(request, grow) rounded to a 2 MiB page leaves less than a page free after
//   a request larger than `grow`, so nearly every such request maps. Expandable segments map whole
//   20 MiB pages and leave half a page free on average, which the next requests often fit in:
//   grpo-gpt2-1.3b's model load maps 294 times here against 252 there, with no release at all.
// Approach: map_ahead_bytes rounds the need up to a whole multiple of the pool's step (`grow`,
//   `small_grow`); map-ahead toward a learned need is unchanged. Release stays page-granular.
//   Scenario test GrowWholeMapsWholeGrowStepsAndLeavesTheRestForTheNextRequests (32 maps without
//   it, 27 with it; checked by making map_ahead_bytes ignore the key).
// Limitations (measured on the 12 target traces, bench/README.md): calls lower on all 12 (synth 1.3b
//   1.36 -> 1.22x, grpo-1.3b 1.33 -> 1.23x, gpt2-1.3b 1.42 -> 1.30x: calls met on 7 instead of 4),
//   but the rest of a step at a new peak and the mapped-ahead memory later split by blocks raise
//   the peak (gpt2-small 3,304 -> 3,394 MiB, 1.0119x ES, waste removed 96 -> 83%; ppo-7b +76 MiB,
//   1.3b-offload +44 MiB): 5/9/7/12 against 6/10/4/12, so off by default. Mapping whole steps only
//   below the high-water mark keeps gpt2-small's loss and gains no calls (5/9/4/12); with
//   reclaim_min_run 32 or 64 MiB: 6/10/4/12 and 5/8/6/12.
// Keep for the rest of the step (keep_for_step:true)
// Rationale: an adaptive release keeps what the phase that starts needs; when a later phase of the
//   same step needs more (generation -> inference -> training), it maps again what that release
//   unmapped: an unmap and a map per run, every step, and no memory saved at the step's peak.
// Approach: a step is one cycle of the job's phases, from the trace's own sequence: it begins each
//   time the phase the first transition entered begins again (follow_step). At any other
//   transition the release keeps at least the largest need (phase_need::bytes) of the phases that
//   followed the starting one in the last whole step (rest_of_step_need). The release into the
//   cycle's first phase is unchanged, so what a rollout phase that starts the step holds for a
//   colocated engine does not move. Scenario test KeepForStepKeepsWhatTheRestOfTheStepNeeds (the
//   release into inference unmaps every step without it, never with it; checked by making
//   rest_of_step_need return 0).
// Limitations (measured, bench/regrow_count.py on `phasealloc export` of the 12 target traces):
//   with the default (need_from_entry, ping-pong keep, 1 GiB release threshold) transition
//   releases whose pages the same step maps again are 0-2 unmaps per trace (ppo-gpt2-1.3b 2,
//   1.3b-offload 2, synth 1.3b 1, ppo-7b 1); nearly all transition unmaps are the release into
//   the step's first phase, regrown in the next step by design (the colocation headroom). The rule
//   moves calls on two traces only (ppo-gpt2-1.3b 1,655 -> 1,649, peak +18 MiB, waste removed
//   92 -> 91%; ppo-7b 861 -> 852) and no target, so it is off. A job whose first phase is not its
//   rollout would keep the rest of the step through the rollout; a phase sequence that changes
//   between steps is matched by the first occurrence of the starting phase.
//
// Limitations: needs a device with virtual memory (cuda_vmm, or the model device with virtual_memory); on a
//   whole-segment device the engine serves the pools with whole segments and only idle segments
//   are released. Prediction is per phase name: a phase whose need varies a lot between iterations
//   pays growth calls when it needs more than last time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/policy.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc {

enum class transition_release { none, all, adaptive };

struct phasealloc_policy_options {
  transition_release release = transition_release::adaptive;
  std::size_t release_threshold_bytes = gib;
  bool reclaim = true;
  std::size_t reclaim_min_run_bytes = 128 * mib;
  std::size_t page_bytes = 2 * mib;
  std::size_t grow_bytes = 20 * mib;
  bool grow_whole = false;
  std::size_t small_grow_bytes = 4 * mib;
  bool map_ahead = true;
  bool need_from_entry = true;
  bool keep_for_step = false;
  bool lifetime = false;
  bool phase_pools = false;
  std::vector<std::string> rollout_phases{"generation", "inference"};
  std::vector<std::uint32_t> pin_tags;
  std::vector<std::size_t> pin_sizes;
  double memory_fraction = 1.0;
};

class phasealloc_policy final : public policy {
 public:
  /// Named tags named_tag_base .. + tag_pool_count - 1 have a pool each (see the note above).
  static constexpr std::uint32_t tag_pool_count = 15;

  explicit phasealloc_policy(phasealloc_policy_options options = {});
  static result<std::unique_ptr<policy>, std::string> create(std::string_view conf);

  std::string spec() const override;
  std::span<const pool_traits> pools() const noexcept override { return pools_; }
  std::size_t round_bytes(std::size_t requested_bytes) const noexcept override;
  pool_id pool_for(const alloc_request& request, std::size_t rounded_bytes) const noexcept override;
  placement placement_for(const alloc_request& request, std::size_t rounded_bytes) const noexcept override;
  std::size_t segment_bytes(pool_id pool, std::size_t rounded_bytes) const noexcept override;
  bool should_split(pool_id pool, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept override;
  double memory_fraction() const noexcept override { return options_.memory_fraction; }

  release_plan before_grow(const grow_context& context) override;
  release_plan on_oom(const grow_context& context) override;
  release_plan on_transition(const transition_context& context) override;
  std::size_t map_ahead_bytes(const grow_context& context) const override;
  bool wants_live_blocks() const noexcept override { return options_.lifetime; }

  /// What the policy learned of a phase from its last interval.
  struct phase_need {
    std::size_t peak_allocated_bytes = 0;
    std::size_t peak_reserved_bytes = 0;
    bool entered_trimmed = false;  ///< It started with its cache cut to the prediction (or below).
    std::size_t entry_allocated_bytes = 0;  ///< Allocated when the interval began.
    std::uint32_t interval = 0;  ///< The interval it was learned from (transition_context::interval).
    /// Bytes to keep for it: the reserved peak it reached from a trimmed start (its own
    /// fragmentation included, so that it does not grow back), else its allocated peak.
    std::size_t bytes() const noexcept {
      return entered_trimmed ? std::max(peak_allocated_bytes, peak_reserved_bytes) : peak_allocated_bytes;
    }
    /// What it added to what was allocated when it began: bytes() less the entry level.
    std::size_t growth_bytes() const noexcept { return bytes() - std::min(bytes(), entry_allocated_bytes); }
  };
  const std::map<std::string, phase_need, std::less<>>& learned_needs() const noexcept { return learned_; }

  /// A request's lifetime key: its rounded size and stream (with the phase it is made in).
  using lifetime_key = std::pair<std::size_t, stream_id>;
  using lifetime_keys = std::set<lifetime_key>;
  /// What the policy learned of the lifetimes of a phase's blocks. A visit of a phase is its run
  /// of consecutive intervals (a new interval of the same phase continues the visit).
  struct phase_lifetimes {
    /// Made in its last visit and still allocated when the visit ended.
    lifetime_keys survived;
    /// Outlived a whole cycle: made in the visit before the last one and still allocated when the
    /// last one began (weights, adapters, optimizer state).
    lifetime_keys long_lived;
    /// Outlived their visit but not the cycle (gradients, rollout buffers, states moved in for a
    /// step and out after it).
    lifetime_keys mid_lived;
    /// The first and last interval of its last visit (none before the first visit ends).
    std::optional<std::pair<std::uint32_t, std::uint32_t>> last_visit;
  };
  const std::map<std::string, phase_lifetimes, std::less<>>& lifetimes() const noexcept { return lifetimes_; }

 private:
  release_step page_release(std::size_t target_bytes, std::size_t min_run_bytes) const;
  /// Bytes to keep for a phase that begins now (need_from_entry: from what is allocated now, less
  /// what the interval the need was learned from made and still holds: that is in both).
  std::size_t need_from(const phase_need& need, const transition_context& c, bool less_held) const noexcept;

  phasealloc_policy_options options_;
  std::vector<pool_traits> pools_;
  std::map<std::string, phase_need, std::less<>> learned_;
  /// The phases seen to follow each phase (the job's cycle, as far as it has been seen).
  std::map<std::string, std::set<std::string, std::less<>>, std::less<>> successors_;
  std::string phase_;              ///< The current phase (set at transitions).
  bool entered_trimmed_ = false;  ///< The current interval started with its cache at the prediction.
  bool in_rollout_ = false;       ///< phase_pools and the current phase is a rollout phase.
  std::size_t high_water_bytes_ = 0;  ///< Highest reserved level of the run so far.
  std::size_t entry_allocated_bytes_ = 0;  ///< Allocated when the current interval began.
  std::size_t need_now_bytes_ = 0;  ///< What the current interval is predicted to need (0: unknown).
  void learn_lifetimes(const transition_context& c);
  /// Follows the job's cycle: a step begins each time the phase its first transition entered
  /// begins again. Only keep_for_step reads it, so only then is it kept.
  void follow_step(std::string_view to);
  /// The most that a phase which followed `to` in the last step needed (0: none known).
  std::size_t rest_of_step_need(std::string_view to) const noexcept;
  std::string cycle_start_;                  ///< The phase the first transition entered.
  std::vector<std::string> step_phases_;      ///< The phases of the current step, in order.
  std::vector<std::string> last_step_phases_; ///< The phases of the last whole step, in order.
  std::map<std::string, phase_lifetimes, std::less<>> lifetimes_;
  /// lifetimes_ of the current phase (nullptr: none learned yet).
  const phase_lifetimes* lifetimes_now_ = nullptr;
  bool before_first_phase_ = true;  ///< No transition yet: the job is loading its model.
  std::uint32_t visit_first_interval_ = 0;  ///< The first interval of the current phase's visit.
};

}  // namespace phasealloc
