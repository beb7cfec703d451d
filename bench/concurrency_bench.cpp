// Concurrency and streams.
//   BM_SharedEngineThreads  1, 2, 4 and 8 threads allocate and free on ONE shared allocator, each on
//                           its own stream (for glibc: one process heap, per-thread arenas and
//                           tcache; in phasealloc_torch_bench also PyTorch's allocator and the C entry
//                           point). Time per op is wall time over all threads' calls (throughput).
//   BM_CrossStreamFree      a block allocated on stream 1 is used by stream 2 (record_stream),
//                           then freed: the free waits on an event, which this model device completes at
//                           once, so the next allocation on stream 1 reclaims it. For glibc there
//                           are no streams: plain malloc/free of the same size.
// Ops are allocate and free calls; record_stream's cost is folded into them.
#include "alloc_patterns.hpp"

namespace phasealloc::bench {
namespace {

/// The allocator the threads of one run share: built by thread 0 before the timed loop (whose
/// start is a barrier, so the other threads see it there), dropped by thread 0 after it.
struct shared_slot {
  std::unique_ptr<engine_allocator> engine;
  std::unique_ptr<glibc_allocator> glibc;
#ifdef PHASEALLOC_BENCH_DEVICE_ALLOCATORS
  std::unique_ptr<torch_caching_allocator> torch;
  std::unique_ptr<c_entry_allocator> c_entry;
#endif
  void reset() {
    engine.reset();
    glibc.reset();
#ifdef PHASEALLOC_BENCH_DEVICE_ALLOCATORS
    torch.reset();
    c_entry.reset();
#endif
  }
};

template <class A>
void shared_pair_loop(benchmark::State& state, std::unique_ptr<A>& shared) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto stream = static_cast<stream_id>(state.thread_index() + 1);
  for (auto _ : state) {
    A* a = shared.get();
    if (a == nullptr) {
      state.SkipWithError("no shared allocator (its policy is not available)");
      break;
    }
    const std::uintptr_t p = a->allocate(bytes, stream);
    benchmark::DoNotOptimize(p);
    a->deallocate(p, bytes);
  }
  if (state.thread_index() == 0 && shared) report(state, *shared, 2.0);
}

/// Makes the slot's allocator of `choice` (thread 0), or says why it cannot.
void make_shared(benchmark::State& state, const allocator_choice& choice, shared_slot& slot) {
  std::string error;
  switch (choice.kind) {
    case allocator_kind::glibc: slot.glibc = std::make_unique<glibc_allocator>(); return;
    case allocator_kind::engine: slot.engine = engine_allocator::make(choice.spec, error); break;
#ifdef PHASEALLOC_BENCH_DEVICE_ALLOCATORS
    case allocator_kind::torch: slot.torch = torch_caching_allocator::make(error); break;
    case allocator_kind::c_entry: slot.c_entry = c_entry_allocator::make(choice.spec, error); break;
#else
    default:
      state.SkipWithError(
          (choice.name + " runs in phasealloc_torch_bench only (it needs torch and a CUDA device)").c_str());
      return;
#endif
  }
  if (!error.empty()) state.SkipWithError((choice.name + " is not available: " + error).c_str());
}

void shared_engine_threads(benchmark::State& state, const allocator_choice& choice, shared_slot& slot) {
  if (state.thread_index() == 0) {
    make_shared(state, choice, slot);
    // Warm each thread's stream, so the timed loop measures cached reuse under contention.
    const auto bytes = static_cast<std::size_t>(state.range(0));
    const auto warm = [&](auto& a) {
      for (int t = 0; t < state.threads(); ++t) {
        const auto stream = static_cast<stream_id>(t + 1);
        a.deallocate(a.allocate(bytes, stream), bytes);
      }
      a.mark();
    };
    if (slot.glibc) warm(*slot.glibc);
    if (slot.engine) warm(*slot.engine);
#ifdef PHASEALLOC_BENCH_DEVICE_ALLOCATORS
    if (slot.torch) warm(*slot.torch);
    if (slot.c_entry) warm(*slot.c_entry);
#endif
  }
  switch (choice.kind) {
    case allocator_kind::glibc: shared_pair_loop(state, slot.glibc); break;
    case allocator_kind::engine: shared_pair_loop(state, slot.engine); break;
#ifdef PHASEALLOC_BENCH_DEVICE_ALLOCATORS
    case allocator_kind::torch: shared_pair_loop(state, slot.torch); break;
    case allocator_kind::c_entry: shared_pair_loop(state, slot.c_entry); break;
#else
    default: break;
#endif
  }
  if (state.thread_index() == 0) slot.reset();
}

struct cross_stream_free {
  template <class A>
  void operator()(benchmark::State& state, A& alloc) const {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    constexpr stream_id compute = 1;
    constexpr stream_id copy = 2;
    alloc.deallocate(alloc.allocate(bytes, compute), bytes);  // warm
    alloc.mark();
    for (auto _ : state) {
      const std::uintptr_t p = alloc.allocate(bytes, compute);
      alloc.record_stream(p, copy);
      alloc.deallocate(p, bytes);
    }
    report(state, alloc, 2.0);
    const alloc_books b = alloc.books();
    if (b.has_device) {  // create/record/query/... of events, per iteration (the warm-up's few included)
      state.counters["event_calls"] = benchmark::Counter(static_cast<double>(b.event_calls),
                                                         benchmark::Counter::kAvgIterations);
    }
  }
};

}  // namespace

void register_concurrency() {
  for (const allocator_choice& choice : chosen_allocators()) {
    auto slot = std::make_shared<shared_slot>();
    const std::string name = "BM_SharedEngineThreads/" + choice.name;
    const auto run = [choice, slot](benchmark::State& state) { shared_engine_threads(state, choice, *slot); };
    benchmark::RegisterBenchmark(name.c_str(), run)
        ->ArgNames({"bytes"})
        ->Arg(512)
        ->Arg(std::int64_t{4} << 20)
        ->Threads(1)
        ->Threads(2)
        ->Threads(4)
        ->Threads(8)
        ->UseRealTime();
  }
#ifndef PHASEALLOC_BENCH_DEVICE_ALLOCATORS  // PyTorch's raw_alloc makes no DataPtr for record_stream
  register_pattern("BM_CrossStreamFree", cross_stream_free{}, [](benchmark::internal::Benchmark* b) {
    b->ArgNames({"bytes"});
    b->Arg(512);
    b->Arg(std::int64_t{4} << 20);
  });
#endif
}

}  // namespace phasealloc::bench
