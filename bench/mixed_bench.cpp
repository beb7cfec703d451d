// Mixed: a ring of live blocks with random lifetimes. Each iteration picks a slot of the ring at
// random (so lifetimes are geometric), frees the block there and allocates a new one of a
// log-uniform size in [min, max]. The sequence comes from a fixed seed and is drawn before the
// timed loop, so no random number is made inside it.
#include <cmath>
#include <random>

#include "alloc_patterns.hpp"

namespace phasealloc::bench {
namespace {

constexpr std::uint64_t seed = 0x5eed'a110c;
constexpr std::size_t sequence_length = std::size_t{1} << 16;

struct step {
  std::uint32_t slot;
  std::size_t bytes;
};

std::vector<step> make_sequence(std::size_t min_bytes, std::size_t max_bytes, std::size_t slots) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_size(std::log(static_cast<double>(min_bytes)),
                                                  std::log(static_cast<double>(max_bytes)));
  std::uniform_int_distribution<std::uint32_t> slot(0, static_cast<std::uint32_t>(slots - 1));
  std::vector<step> out(sequence_length);
  for (step& s : out) {
    s.slot = slot(rng);
    s.bytes = static_cast<std::size_t>(std::exp(log_size(rng)));
  }
  return out;
}

struct mixed {
  template <class A>
  void operator()(benchmark::State& state, A& alloc) const {
    const auto min_bytes = static_cast<std::size_t>(state.range(0));
    const auto max_bytes = static_cast<std::size_t>(state.range(1));
    const auto slots = static_cast<std::size_t>(state.range(2));
    const std::vector<step> sequence = make_sequence(min_bytes, max_bytes, slots);
    struct live {
      std::uintptr_t addr = 0;
      std::size_t bytes = 0;
    };
    std::vector<live> ring(slots);
    // Fill the ring first (untimed), so the timed loop is in steady state: one free + one allocate.
    std::size_t i = 0;
    for (live& l : ring) {
      l.bytes = sequence[i++ % sequence_length].bytes;
      l.addr = alloc.allocate(l.bytes);
    }
    alloc.mark();
    for (auto _ : state) {
      const step& s = sequence[i++ & (sequence_length - 1)];
      live& l = ring[s.slot];
      alloc.deallocate(l.addr, l.bytes);
      l.bytes = s.bytes;
      l.addr = alloc.allocate(s.bytes);
    }
    report(state, alloc, 2.0);
    for (live& l : ring) alloc.deallocate(l.addr, l.bytes);
  }
};

}  // namespace

void register_mixed() {
  register_pattern("BM_Mixed", mixed{}, [](benchmark::internal::Benchmark* b) {
    b->ArgNames({"min", "max", "live"});
    b->Args({512, std::int64_t{64} << 20, 256});  // the range: 512 B .. 64 MiB
    b->Args({512, std::int64_t{1} << 20, 256});   // small blocks only (torch's small pool)
  });
}

}  // namespace phasealloc::bench
