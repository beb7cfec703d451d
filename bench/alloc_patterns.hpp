// The three allocators every bench pattern runs against, behind one small duck-typed interface,
// and the helpers that register a pattern once per allocator and report its counters.
//
//   engine_allocator  the phasealloc engine with a policy built from a spec ("phasealloc",
//                     "pytorch", "pytorch:expandable_segments:True", ...) on a model device with zero
//                     call cost, so only the allocator's own host time is measured. The model device uses
//                     virtual memory when the policy has an expandable pool, else whole segments
//                     (the replay tool's rule).
//   glibc_allocator   malloc/free of the same sizes: a host-only reference with no device, no
//                     streams and no phases.
//
// A pattern is a generic callable `(benchmark::State&, auto& alloc)`; register_pattern() makes one
// benchmark per allocator, named BM_<Pattern>/<allocator>/<args>, and labels each run with the
// allocator and its device so the JSON says what ran.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "alloc_books.hpp"
#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policy.hpp"

#ifdef PHASEALLOC_BENCH_DEVICE_ALLOCATORS
#include "device_allocators.hpp"
#endif

namespace phasealloc::bench {

/// The phasealloc engine on a zero-cost model device, with the policy a spec names.
class engine_allocator {
 public:
  /// nullptr and `error` set when the spec names no registered policy.
  static std::unique_ptr<engine_allocator> make(std::string_view spec, std::string& error);

  /// 0 when the allocation failed (counted; the run reports an error).
  std::uintptr_t allocate(std::size_t bytes, stream_id stream = 0, std::uint32_t tag = 0) {
    auto r = engine_->allocate(bytes, stream, tag);
    if (r) [[likely]] return r.value();
    note_failure(bytes, r.error());
    return 0;
  }
  void deallocate(std::uintptr_t addr, std::size_t bytes) {
    if (addr != 0) [[likely]] (void)engine_->deallocate(addr, bytes);
  }
  void record_stream(std::uintptr_t addr, stream_id stream) {
    if (addr != 0) (void)engine_->record_stream(addr, stream);
  }
  void set_phase(std::string_view name) { engine_->set_phase(name); }
  /// Current bytes reserved (for patterns that sample).
  std::size_t reserved_bytes() const { return engine_->levels().reserved_bytes; }

  /// Throws the engine, model device and policy away and builds fresh ones (the books keep the totals).
  void reset();
  /// Marks the start of the timed loop: device_calls_since_mark() counts from here.
  void mark();
  std::uint64_t device_calls_since_mark() const;
  alloc_books books() const;
  /// "phasealloc (model device, virtual memory)", ...
  std::string label() const;
  engine& raw() { return *engine_; }

  ~engine_allocator();

 private:
  engine_allocator() = default;
  void build();
  void fold();  ///< Adds the current engine's books to the totals.
  void note_failure(std::size_t bytes, const alloc_error& error);

  std::string spec_;
  std::unique_ptr<policy> policy_;
  std::unique_ptr<model_device> device_;
  std::unique_ptr<engine> engine_;
  bool virtual_memory_ = false;
  alloc_books folded_;          ///< Totals of engines already thrown away.
  std::uint64_t mark_calls_ = 0;             ///< This engine's device calls at mark().
  std::uint64_t folded_calls_since_mark_ = 0;  ///< Calls since mark() by engines already reset.
  std::uint64_t failures_ = 0;
  std::string first_failure_;
};

/// glibc malloc/free: host only.
class glibc_allocator {
 public:
  std::uintptr_t allocate(std::size_t bytes, stream_id /*stream*/ = 0, std::uint32_t /*tag*/ = 0);
  void deallocate(std::uintptr_t addr, std::size_t /*bytes*/);
  void record_stream(std::uintptr_t /*addr*/, stream_id /*stream*/) {}
  void set_phase(std::string_view /*name*/) {}
  void reset() {}
  void mark() {}
  std::uint64_t device_calls_since_mark() const { return 0; }
  alloc_books books() const;
  std::string label() const { return "glibc malloc/free (host only, no device)"; }

 private:
  std::uint64_t failures_ = 0;
};

/// The allocators of this run, as given to --allocators= (default "phasealloc;pytorch;glibc").
/// "glibc", "torch" (PyTorch's own allocator), "capi[:SPEC]" (phasealloc's C entry point), or a
/// policy spec for the engine. The last two are phasealloc_torch_bench's only.
enum class allocator_kind { engine, glibc, torch, c_entry };

struct allocator_choice {
  std::string name;  ///< As it appears in benchmark names ("phasealloc", "pytorch", "glibc").
  std::string spec;  ///< Policy spec for the engine or the C entry point; empty for glibc and torch.
  allocator_kind kind = allocator_kind::engine;
  bool glibc() const { return kind == allocator_kind::glibc; }
};
std::vector<allocator_choice> parse_allocators(std::string_view list);
const std::vector<allocator_choice>& chosen_allocators();
void set_chosen_allocators(std::vector<allocator_choice> choice);

/// --check: engines abort on misuse and run the invariant checker after every operation (slow;
/// verifies the patterns, not for timing).
void set_checked_engines(bool on);

/// Sets the counters every pattern reports, after its timed loop:
///   time_per_op       seconds per allocator call (allocate, free or record_stream), from the
///                     loop's time and `ops_per_iteration` (Google Benchmark's kInvert rate);
///   peak_reserved     bytes (engines only);
///   device_calls      reserve+release+map+unmap per iteration of the timed loop (engines only);
/// and marks the run as an error when an allocation failed. In a multi-threaded run only thread 0
/// reports, with ops_per_iteration per thread (iterations are summed over threads).
template <class A>
void report(benchmark::State& state, const A& alloc, double ops_per_iteration) {
  if (state.thread_index() != 0) return;
  using benchmark::Counter;
  state.counters["time_per_op"] = Counter(ops_per_iteration, Counter::kIsIterationInvariantRate | Counter::kInvert);
  const alloc_books b = alloc.books();
  if (b.has_device) {
    state.counters["peak_reserved"] = Counter(static_cast<double>(b.peak_reserved_bytes), Counter::kDefaults,
                                              Counter::OneK::kIs1024);
    state.counters["device_calls"] = Counter(static_cast<double>(alloc.device_calls_since_mark()),
                                             Counter::kAvgIterations);
  }
  state.SetLabel(alloc.label());
  if (b.failures != 0) {
    const std::string message = std::to_string(b.failures) + " allocation(s) failed; first: " + b.first_failure;
    state.SkipWithError(message.c_str());
  }
}

using bench_apply = std::function<void(benchmark::internal::Benchmark*)>;

/// Runs `pattern(state, alloc)` with a fresh allocator of each chosen kind.
template <class Pattern>
void run_pattern(benchmark::State& state, const allocator_choice& choice, Pattern& pattern) {
  if (choice.glibc()) {
    glibc_allocator alloc;
    pattern(state, alloc);
    return;
  }
  if (choice.kind == allocator_kind::torch || choice.kind == allocator_kind::c_entry) {
#ifdef PHASEALLOC_BENCH_DEVICE_ALLOCATORS
    std::string error;
    if (choice.kind == allocator_kind::torch) {
      if (auto alloc = torch_caching_allocator::make(error)) {
        pattern(state, *alloc);
        return;
      }
    } else if (auto alloc = c_entry_allocator::make(choice.spec, error)) {
      pattern(state, *alloc);
      return;
    }
    state.SkipWithError((choice.name + " is not available: " + error).c_str());
#else
    state.SkipWithError((choice.name + " runs in phasealloc_torch_bench only (it needs torch and a CUDA device)").c_str());
#endif
    return;
  }
  std::string error;
  std::unique_ptr<engine_allocator> alloc = engine_allocator::make(choice.spec, error);
  if (!alloc) {
    state.SkipWithError(("policy '" + choice.spec + "' is not available: " + error).c_str());
    return;
  }
  pattern(state, *alloc);
}

/// Registers BM_<family>/<allocator> for every chosen allocator; `apply` adds the arguments.
template <class Pattern>
void register_pattern(const std::string& family, Pattern pattern, const bench_apply& apply) {
  for (const allocator_choice& choice : chosen_allocators()) {
    const std::string name = family + "/" + choice.name;
    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
        name.c_str(), [choice, pattern](benchmark::State& state) mutable { run_pattern(state, choice, pattern); });
    apply(b);
  }
}

/// Each suite's registration function (called by main once the allocators are known).
void register_hot_path();
void register_mixed();
void register_batch();
void register_kv_cache();
void register_rlhf_phases();
void register_pr193400();
void register_concurrency();

}  // namespace phasealloc::bench
