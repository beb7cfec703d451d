// The reproducer of PyTorch PR #193400: each cycle allocates 91 MiB and 45.5 MiB, allocates a
// 2 MiB block that stays alive, then frees the two large blocks; 100 cycles. An allocator that
// places the kept 2 MiB blocks inside the freed large ranges cannot reuse those ranges for the next
// large pair and reserves more and more. Each iteration is one full reproducer on a fresh engine
// (built outside the timed region), ending with the kept blocks freed.
//
// Counters: peak_live (bytes the program held at once, requested sizes: the floor for any
// allocator), peak_reserved and reserved_over_live (target for phasealloc: <= 2).
#include <algorithm>

#include "alloc_patterns.hpp"

namespace phasealloc::bench {
namespace {

constexpr std::int64_t default_cycles = 100;
constexpr std::size_t big_bytes = 91 * mib;
constexpr std::size_t mid_bytes = 91 * mib / 2;  // 45.5 MiB
constexpr std::size_t kept_bytes = 2 * mib;

struct pr193400 {
  template <class A>
  void operator()(benchmark::State& state, A& alloc) const {
    const auto cycles = static_cast<std::size_t>(state.range(0));
    std::vector<std::uintptr_t> kept(cycles);
    std::size_t peak_live = 0;
    alloc.mark();
    for (auto _ : state) {
      state.PauseTiming();
      alloc.reset();  // a fresh engine per reproducer (a no-op for glibc)
      state.ResumeTiming();
      std::size_t live = 0;
      for (std::size_t c = 0; c < cycles; ++c) {
        const std::uintptr_t big = alloc.allocate(big_bytes);
        const std::uintptr_t mid = alloc.allocate(mid_bytes);
        kept[c] = alloc.allocate(kept_bytes);
        live += big_bytes + mid_bytes + kept_bytes;
        peak_live = std::max(peak_live, live);
        alloc.deallocate(big, big_bytes);
        alloc.deallocate(mid, mid_bytes);
        live -= big_bytes + mid_bytes;
      }
      for (const std::uintptr_t p : kept) alloc.deallocate(p, kept_bytes);
    }
    report(state, alloc, static_cast<double>(6 * cycles));
    using benchmark::Counter;
    state.counters["peak_live"] = Counter(static_cast<double>(peak_live), Counter::kDefaults, Counter::OneK::kIs1024);
    const alloc_books b = alloc.books();
    if (b.has_device && peak_live != 0) {
      state.counters["reserved_over_live"] =
          static_cast<double>(b.peak_reserved_bytes) / static_cast<double>(peak_live);
    }
  }
};

}  // namespace

void register_pr193400() {
  register_pattern("BM_Pr193400", pr193400{}, [](benchmark::internal::Benchmark* b) {
    b->ArgNames({"cycles"});
    b->Arg(default_cycles);
    b->Unit(benchmark::kMicrosecond);
  });
}

}  // namespace phasealloc::bench
