// Replay speed: events per second of `phasealloc replay` on one core, the real engine and a policy
// against the model device, on synthetic RLHF traces of growing length (cost must stay linear).
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "phasealloc/replay/replay.hpp"
#include "phasealloc/synth/synth.hpp"

namespace {

const phasealloc::trace& cached_trace(const std::string& job) {
  static std::map<std::string, phasealloc::trace> traces;
  auto it = traces.find(job);
  if (it == traces.end()) {
    auto parsed = phasealloc::parse_job(job);
    auto t = phasealloc::synthesize(parsed.value());
    it = traces.emplace(job, std::move(t).value()).first;
  }
  return it->second;
}

void BM_Replay(benchmark::State& state, std::string job, std::string policy) {
  const phasealloc::trace& t = cached_trace(job);
  for (auto _ : state) {
    auto r = phasealloc::replay(t, policy);
    if (!r) {
      state.SkipWithError(r.error().c_str());
      return;
    }
    benchmark::DoNotOptimize(r.value().peak_reserved_bytes);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t.events.size()));
  state.counters["events"] = static_cast<double>(t.events.size());
}

BENCHMARK_CAPTURE(BM_Replay, ppo125m_1iter_pytorch, "ppo-125m,iterations:1", "pytorch")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, ppo125m_pytorch, "ppo-125m", "pytorch")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, ppo1_3b_pytorch, "ppo-1.3b", "pytorch")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, ppo7b_pytorch, "ppo-7b", "pytorch")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, ppo1_3b_expandable, "ppo-1.3b", "pytorch:expandable_segments:True")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, ppo1_3b_phasealloc, "ppo-1.3b", "phasealloc")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
