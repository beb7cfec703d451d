// Hot path: allocate and free one size over and over, so every allocation after the first is
// served from the cache. One iteration is one allocate + free pair (two allocator calls).
#include "alloc_patterns.hpp"

namespace phasealloc::bench {
namespace {

struct hot_path {
  template <class A>
  void operator()(benchmark::State& state, A& alloc) const {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    alloc.deallocate(alloc.allocate(bytes), bytes);  // warm the cache: the first grow is not timed
    alloc.mark();
    for (auto _ : state) {
      const std::uintptr_t p = alloc.allocate(bytes);
      benchmark::DoNotOptimize(p);
      alloc.deallocate(p, bytes);
    }
    report(state, alloc, 2.0);
  }
};

}  // namespace

void register_hot_path() {
  register_pattern("BM_HotPath", hot_path{}, [](benchmark::internal::Benchmark* b) {
    b->ArgNames({"bytes"});
    for (const std::int64_t bytes : {std::int64_t{512}, std::int64_t{64} << 10, std::int64_t{4} << 20,
                                     std::int64_t{64} << 20}) {
      b->Arg(bytes);
    }
  });
}

}  // namespace phasealloc::bench
