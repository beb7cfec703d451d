// hot_path_pairs: allocate + free one size, N times, in one function per allocator, so that
// callgrind can count the instructions of exactly those pairs (bench/callgrind_pairs.sh).
//
//   hot_path_pairs engine SPEC BYTES N   the engine with policy SPEC on a zero-cost model device
//   hot_path_pairs capi SPEC BYTES N     phasealloc_malloc / phasealloc_free (the C entry point PyTorch
//                                        calls), device:model, policy SPEC
//   hot_path_pairs glibc - BYTES N       malloc / free
//   hot_path_pairs mixed SPEC MAX N      the engine on BM_Mixed's pattern: a ring of 256 live blocks,
//                                        each step frees a random one and allocates a log-uniform
//                                        size in [512 B, MAX] (seeded); N steps after the ring is full
//
// Design note
// Rationale: instruction counts are the noise-free measure of the hot path (time on a shared VM is
//   not); Google Benchmark runs a loop an unknown number of times, so counting inside it needs the
//   iteration count from elsewhere. Here the count is N by construction.
// Approach: every mode warms up with one pair outside the counted function, then runs N pairs in
//   run_pairs_<mode> (never inlined: callgrind --toggle-collect names it). The process prints one
//   JSON line with what ran; the script divides callgrind's total by N.
// Limitations: one size, one stream, one thread: the cached-reuse path only (BM_HotPath's pattern).
#include <sys/types.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
#include <cstdlib>
#include <memory>
#include <string>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"
#include "phasealloc_c_api.h"

namespace {

using phasealloc::engine;

[[gnu::noinline]] std::size_t run_pairs_engine(engine& eng, std::size_t bytes, std::size_t n) {
  std::size_t failures = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto r = eng.allocate(bytes, 0);
    if (!r) {
      ++failures;
      continue;
    }
    (void)eng.deallocate(r.value(), bytes);
  }
  return failures;
}

[[gnu::noinline]] std::size_t run_pairs_capi(std::size_t bytes, std::size_t n) {
  std::size_t failures = 0;
  for (std::size_t i = 0; i < n; ++i) {
    try {
      void* p = phasealloc_malloc(static_cast<ssize_t>(bytes), 0, nullptr);  // throws on failure, as PyTorch expects
      phasealloc_free(p, static_cast<ssize_t>(bytes), 0, nullptr);
    } catch (...) {
      ++failures;
    }
  }
  return failures;
}

[[gnu::noinline]] std::size_t run_pairs_glibc(std::size_t bytes, std::size_t n) {
  std::size_t failures = 0;
  for (std::size_t i = 0; i < n; ++i) {
    void* p = std::malloc(bytes);
    asm volatile("" : : "r"(p) : "memory");  // keep the pair
    if (p == nullptr) ++failures;
    std::free(p);
  }
  return failures;
}

struct mixed_step {
  std::size_t slot;
  std::size_t bytes;
};

[[gnu::noinline]] std::size_t run_pairs_mixed(engine& eng, std::vector<std::pair<std::uintptr_t, std::size_t>>& ring,
                                              const std::vector<mixed_step>& steps) {
  std::size_t failures = 0;
  for (const mixed_step& s : steps) {
    auto& [addr, bytes] = ring[s.slot];
    (void)eng.deallocate(addr, bytes);
    auto r = eng.allocate(s.bytes, 0);
    if (!r) ++failures;
    addr = r ? r.value() : 0;
    bytes = s.bytes;
  }
  return failures;
}

/// An engine with the policy SPEC on the model device bench/alloc_patterns.cpp gives the patterns
/// (80 GiB, 2 MiB pages, virtual memory when a pool is expandable, zero-cost calls, events complete
/// at once), so the counts here are of the benchmarks' configuration; nullptr after saying why.
struct model_engine {
  std::unique_ptr<phasealloc::policy> pol;
  std::unique_ptr<phasealloc::model_device> dev;
  std::unique_ptr<engine> eng;
};

std::unique_ptr<model_engine> make_model_engine(const std::string& spec) {
  auto pol = phasealloc::make_policy(spec);
  if (!pol) {
    std::fprintf(stderr, "hot_path_pairs: %s\n", pol.error().c_str());
    return nullptr;
  }
  auto out = std::make_unique<model_engine>();
  out->pol = std::move(pol).value();
  phasealloc::model_device_config config;
  config.capacity_bytes = std::size_t{80} << 30;
  config.granularity_bytes = std::size_t{2} << 20;
  for (const phasealloc::pool_traits& p : out->pol->pools()) config.virtual_memory = config.virtual_memory || p.expandable;
  config.events_complete_immediately = true;
  out->dev = std::make_unique<phasealloc::model_device>(config);
  out->eng = std::make_unique<engine>(*out->dev, *out->pol);
  return out;
}

int usage() {
  std::fprintf(stderr, "usage: hot_path_pairs engine|capi|glibc SPEC BYTES N\n       hot_path_pairs mixed SPEC MAX N\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) return usage();
  const std::string mode = argv[1];
  const std::string spec = argv[2];
  const auto bytes = static_cast<std::size_t>(std::strtoull(argv[3], nullptr, 10));
  const auto n = static_cast<std::size_t>(std::strtoull(argv[4], nullptr, 10));
  std::size_t failures = 0;
  if (mode == "mixed") {
    const auto model = make_model_engine(spec);
    if (!model) return 1;
    engine& eng = *model->eng;
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> log_size(std::log(512.0), std::log(static_cast<double>(bytes)));
    std::vector<std::pair<std::uintptr_t, std::size_t>> ring(256);
    for (auto& [addr, size] : ring) {
      size = static_cast<std::size_t>(std::exp(log_size(rng)));
      addr = eng.allocate(size, 0).value();
    }
    std::vector<mixed_step> steps(n);
    for (mixed_step& s : steps) s = {static_cast<std::size_t>(rng() % ring.size()), static_cast<std::size_t>(std::exp(log_size(rng)))};
    failures += run_pairs_mixed(eng, ring, steps);
  } else if (mode == "engine") {
    const auto model = make_model_engine(spec);
    if (!model) return 1;
    failures += run_pairs_engine(*model->eng, bytes, 1);  // warm: the first pair grows
    failures += run_pairs_engine(*model->eng, bytes, n);
  } else if (mode == "capi") {
    const std::string conf = "device:model,policy:[" + spec + "]";
    if (phasealloc_configure(conf.c_str()) != 0) {
      std::fprintf(stderr, "hot_path_pairs: phasealloc_configure(\"%s\"): %s\n", conf.c_str(), phasealloc_last_error());
      return 1;
    }
    phasealloc_init(1);
    failures += run_pairs_capi(bytes, 1);
    failures += run_pairs_capi(bytes, n);
  } else if (mode == "glibc") {
    failures += run_pairs_glibc(bytes, 1);
    failures += run_pairs_glibc(bytes, n);
  } else {
    return usage();
  }
  std::printf("{\"mode\": \"%s\", \"spec\": \"%s\", \"bytes\": %zu, \"pairs\": %zu, \"failures\": %zu}\n", mode.c_str(),
              spec.c_str(), bytes, n, failures);
  return failures == 0 ? 0 : 1;
}
