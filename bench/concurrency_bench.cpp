// Concurrency and streams.
//   BM_SharedEngineThreads  two threads allocate and free on ONE shared allocator, each on its own
//                           stream (for glibc: one process heap, per-thread arenas and tcache).
//                           Time per op is wall time over both threads' calls (throughput).
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

void shared_engine_threads(benchmark::State& state, const allocator_choice& choice, shared_slot& slot) {
  if (state.thread_index() == 0) {
    if (choice.glibc()) {
      slot.glibc = std::make_unique<glibc_allocator>();
    } else if (choice.kind != allocator_kind::engine) {
      state.SkipWithError((choice.name + ": the two-thread pattern runs on the engine and glibc only").c_str());
    } else {
      std::string error;
      slot.engine = engine_allocator::make(choice.spec, error);
      if (!slot.engine) state.SkipWithError(("policy '" + choice.spec + "' is not available: " + error).c_str());
    }
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
  }
  if (choice.glibc()) shared_pair_loop(state, slot.glibc);
  else shared_pair_loop(state, slot.engine);
  if (state.thread_index() == 0) {
    slot.engine.reset();
    slot.glibc.reset();
  }
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
        ->Threads(2)
        ->UseRealTime();
  }
  register_pattern("BM_CrossStreamFree", cross_stream_free{}, [](benchmark::internal::Benchmark* b) {
    b->ArgNames({"bytes"});
    b->Arg(512);
    b->Arg(std::int64_t{4} << 20);
  });
}

}  // namespace phasealloc::bench
