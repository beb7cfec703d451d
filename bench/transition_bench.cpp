// The cost of a phase transition as the number of live blocks grows: 10^3 to 10^6 blocks of mixed
// small sizes (512 B to 64 KiB: activations, optimizer states of a sharded model, KV pages) stay
// allocated while the job moves between two phases. Each iteration of BM_Transition is one
// transition (set_phase), on the engine with the model device (zero device cost: the engine's own
// host time); the policy's learned need (need_from_entry) reads the engine's per-interval sums, so
// nothing walks the live blocks. BM_MakeLiveBlocks times making them (one run each): growing
// the phasealloc policy's expandable pools walks their blocks at every growth (grow_expandable's
// search for an unmapped run, before_grow's reclaim), so that cost grows with the square of the
// blocks, and its 10^6-block transition row is left out (making them takes over 10 minutes).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace {

using namespace phasealloc;

/// `count` blocks of 512 B to 64 KiB (log-uniform, a fixed seed) allocated on `eng`; empty when the
/// device ran out of memory.
std::vector<device_address> make_live_blocks(engine& eng, std::size_t count) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> log_size(9, 16);
  std::vector<device_address> live;
  live.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto r = eng.allocate(std::size_t{1} << log_size(rng), 0);
    if (!r) return {};
    live.push_back(r.value());
  }
  return live;
}

model_device_config big_device() { return {.capacity_bytes = 1024 * gib, .virtual_memory = true}; }

void BM_MakeLiveBlocks(benchmark::State& state, std::string spec) {
  const auto count = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();  // making the engine and tearing it down are not part of it
    auto made = make_policy(spec);
    if (!made) {
      state.SkipWithError(made.error().c_str());
      return;
    }
    std::unique_ptr<policy> pol = std::move(made).value();
    auto dev = std::make_unique<model_device>(big_device());
    auto eng = std::make_unique<engine>(*dev, *pol);
    state.ResumeTiming();
    const bool made_all = make_live_blocks(*eng, count).size() == count;
    state.PauseTiming();
    eng.reset();
    state.ResumeTiming();
    if (!made_all) {
      state.SkipWithError("out of memory while making the live blocks");
      return;
    }
  }
  state.counters["live_blocks"] = static_cast<double>(count);
}

void BM_Transition(benchmark::State& state, std::string spec) {
  const auto live_blocks = static_cast<std::size_t>(state.range(0));
  auto made = make_policy(spec);
  if (!made) {
    state.SkipWithError(made.error().c_str());
    return;
  }
  std::unique_ptr<policy> pol = std::move(made).value();
  model_device dev(big_device());
  engine eng(dev, *pol);
  eng.set_phase("training");
  const std::vector<device_address> live = make_live_blocks(eng, live_blocks);
  if (live.size() != live_blocks) {
    state.SkipWithError("out of memory while making the live blocks");
    return;
  }
  bool optimizer = false;
  for (auto _ : state) {
    eng.set_phase(optimizer ? "optimizer" : "training");
    optimizer = !optimizer;
  }
  state.counters["live_blocks"] = static_cast<double>(live_blocks);
  state.SetItemsProcessed(state.iterations());
  for (const device_address a : live) (void)eng.deallocate(a);
}

BENCHMARK_CAPTURE(BM_Transition, phasealloc, "phasealloc")
    ->ArgName("live_blocks")->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Transition, phasealloc_lifetime, "phasealloc:lifetime:true")
    ->ArgName("live_blocks")->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Transition, pytorch, "pytorch")
    ->ArgName("live_blocks")->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MakeLiveBlocks, phasealloc, "phasealloc")
    ->ArgName("live_blocks")->Arg(10000)->Arg(30000)->Arg(100000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MakeLiveBlocks, pytorch, "pytorch")
    ->ArgName("live_blocks")->Arg(10000)->Arg(30000)->Arg(100000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
