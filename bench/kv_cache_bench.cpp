// KV-cache growth by concatenation (torch.cat of the past keys/values with the new token, as
// Hugging Face's legacy cache does): at each decoding step n, every layer allocates K and V for
// n+1 tokens, then frees its n-token K and V. One iteration is one sequence of `steps` steps.
#include "alloc_patterns.hpp"

namespace phasealloc::bench {
namespace {

constexpr std::size_t steps = 256;

struct kv_cache_growth {
  template <class A>
  void operator()(benchmark::State& state, A& alloc) const {
    const auto layers = static_cast<std::size_t>(state.range(0));
    const auto token_bytes = static_cast<std::size_t>(state.range(1));  // per token, per layer, for K (and V)
    std::vector<std::uintptr_t> k(layers);
    std::vector<std::uintptr_t> v(layers);
    const auto sequence = [&] {
      for (std::size_t l = 0; l < layers; ++l) {
        k[l] = alloc.allocate(token_bytes);
        v[l] = alloc.allocate(token_bytes);
      }
      for (std::size_t n = 1; n < steps; ++n) {
        const std::size_t old_bytes = n * token_bytes;
        const std::size_t new_bytes = old_bytes + token_bytes;
        for (std::size_t l = 0; l < layers; ++l) {
          const std::uintptr_t nk = alloc.allocate(new_bytes);
          const std::uintptr_t nv = alloc.allocate(new_bytes);
          alloc.deallocate(k[l], old_bytes);
          alloc.deallocate(v[l], old_bytes);
          k[l] = nk;
          v[l] = nv;
        }
      }
      for (std::size_t l = 0; l < layers; ++l) {
        alloc.deallocate(k[l], steps * token_bytes);
        alloc.deallocate(v[l], steps * token_bytes);
      }
    };
    sequence();  // warm: the timed sequences run against a cache the first one filled
    alloc.mark();
    for (auto _ : state) sequence();
    report(state, alloc, 4.0 * static_cast<double>(layers * steps));
  }
};

}  // namespace

void register_kv_cache() {
  register_pattern("BM_KvCacheGrowth", kv_cache_growth{}, [](benchmark::internal::Benchmark* b) {
    b->ArgNames({"layers", "token_bytes"});
    for (const std::int64_t layers : {12, 32}) {
      for (const std::int64_t token_bytes : {std::int64_t{8} << 10, std::int64_t{64} << 10}) {
        b->Args({layers, token_bytes});
      }
    }
    b->Unit(benchmark::kMicrosecond);
  });
}

}  // namespace phasealloc::bench
