// Batches: allocate N blocks, then free them in reverse (LIFO, like a stack of activations) or in
// allocation order (FIFO, like a queue of buffers). One iteration is the whole batch: 2N calls.
#include "alloc_patterns.hpp"

namespace phasealloc::bench {
namespace {

template <bool lifo>
struct batch {
  template <class A>
  void operator()(benchmark::State& state, A& alloc) const {
    const auto n = static_cast<std::size_t>(state.range(0));
    const auto bytes = static_cast<std::size_t>(state.range(1));
    std::vector<std::uintptr_t> blocks(n);
    const auto run_once = [&] {
      for (std::uintptr_t& p : blocks) p = alloc.allocate(bytes);
      if constexpr (lifo) {
        for (std::size_t i = n; i-- > 0;) alloc.deallocate(blocks[i], bytes);
      } else {
        for (const std::uintptr_t p : blocks) alloc.deallocate(p, bytes);
      }
    };
    run_once();  // warm the cache
    alloc.mark();
    for (auto _ : state) {
      run_once();
      benchmark::ClobberMemory();
    }
    report(state, alloc, 2.0 * static_cast<double>(n));
  }
};

void batch_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "bytes"});
  for (const std::int64_t n : {16, 256}) {
    for (const std::int64_t bytes : {std::int64_t{4} << 10, std::int64_t{2} << 20}) b->Args({n, bytes});
  }
}

}  // namespace

void register_batch() {
  register_pattern("BM_BatchLifo", batch<true>{}, batch_args);
  register_pattern("BM_BatchFifo", batch<false>{}, batch_args);
}

}  // namespace phasealloc::bench
