// Pinned host buffers for offload copies: phasealloc's host_pool against a model of PyTorch's
// CachingHostAllocator, streaming a Llama-2-7B's bf16 weights through host staging buffers.
//
// Pattern: every iteration copies each weight tensor through one staging buffer; a layer's
// buffers are held while its copies run and handed back when the layer after next starts
// (prefetch depth 2), with the copy stream run at each layer. Counters: the peak page-locked bytes
// and the number of host allocations (cudaHostAlloc calls) over all iterations, the copies that
// waited for an earlier copy or went through pageable memory (the budget at work), and the time
// per acquire+release on model_host_memory (heap memory: the allocation calls themselves cost what
// malloc costs here; on a GPU each cudaHostAlloc costs milliseconds per GiB).
//
// The PyTorch model follows CachingHostAllocator: sizes round up to a power of two, a freed block
// is reused by a request of the same rounded size once the copy stream has run past its event,
// and nothing is ever returned (no budget). Its time is not comparable: it allocates nothing.
#include <benchmark/benchmark.h>

#include <bit>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/devices/model_host_memory.hpp"
#include "phasealloc/host_pool.hpp"

namespace {

using phasealloc::gib;
using phasealloc::mib;

constexpr std::size_t hidden = 4096;
constexpr std::size_t ffn = 11008;
constexpr std::size_t vocab = 32000;
constexpr std::size_t layers = 32;
constexpr std::size_t bf16 = 2;
constexpr int iterations = 4;

/// The tensors of each copy unit: the embeddings, each layer, the head.
std::vector<std::vector<std::size_t>> weight_units() {
  std::vector<std::vector<std::size_t>> units;
  units.push_back({vocab * hidden * bf16});
  for (std::size_t l = 0; l < layers; ++l) {
    units.push_back({hidden * hidden * bf16, hidden * hidden * bf16, hidden * hidden * bf16, hidden * hidden * bf16,
                     hidden * ffn * bf16, hidden * ffn * bf16, hidden * ffn * bf16, hidden * bf16, hidden * bf16});
  }
  units.push_back({hidden * bf16, vocab * hidden * bf16});
  return units;
}

/// PyTorch's CachingHostAllocator, reduced to what decides its footprint.
class pow2_host_cache {
 public:
  void* acquire(std::size_t bytes) {
    const std::size_t rounded = std::bit_ceil(bytes);
    auto& free = free_[rounded];
    if (!free.empty()) {
      void* p = free.back();
      free.pop_back();
      return p;
    }
    ++num_host_alloc;
    locked_bytes += rounded;
    void* p = reinterpret_cast<void*>(next_);  // never dereferenced: only the books matter here
    next_ += rounded;
    sizes_[p] = rounded;
    return p;
  }
  /// Reusable once the copy stream has run (the allocator records an event on it).
  void release(void* p) { pending_.push_back(p); }
  void run_stream() {
    for (void* p : pending_) free_[sizes_.at(p)].push_back(p);
    pending_.clear();
  }

  std::int64_t num_host_alloc = 0;
  std::size_t locked_bytes = 0;

 private:
  std::uintptr_t next_ = 0x1000;
  std::map<std::size_t, std::vector<void*>> free_;
  std::map<void*, std::size_t> sizes_;
  std::vector<void*> pending_;
};

/// Runs the pattern; acquire(bytes) -> handle, release(handle) after the copy stream ran.
template <class Acquire, class Release, class RunStream>
void stream_weights(const std::vector<std::vector<std::size_t>>& units, Acquire&& acquire, Release&& release,
                    RunStream&& run_stream) {
  std::deque<std::vector<void*>> in_flight;
  for (int it = 0; it < iterations; ++it) {
    for (const auto& unit : units) {
      std::vector<void*> held;
      for (std::size_t bytes : unit) held.push_back(acquire(bytes));
      in_flight.push_back(std::move(held));
      run_stream();
      if (in_flight.size() > 2) {
        for (void* p : in_flight.front()) release(p);
        in_flight.pop_front();
      }
    }
  }
  for (auto& held : in_flight) {
    for (void* p : held) release(p);
  }
}

void BM_HostStaging_phasealloc(benchmark::State& state) {
  const auto units = weight_units();
  std::int64_t copies = 0;
  phasealloc::host_pool_stats last;
  std::int64_t fallbacks = 0;
  for (auto _ : state) {
    phasealloc::model_host_memory host;
    phasealloc::model_device gpu(phasealloc::model_device_config{.events_complete_immediately = false});
    phasealloc::host_pool pool(host, &gpu, {.budget_bytes = static_cast<std::size_t>(state.range(0)) * mib});
    fallbacks = 0;
    stream_weights(
        units,
        [&](std::size_t bytes) -> void* {
          ++copies;
          auto b = pool.acquire(bytes);
          if (!b) {  // refused at the budget: this copy goes through pageable memory
            ++fallbacks;
            return nullptr;
          }
          return b.value().ptr;
        },
        [&](void* p) {
          if (p != nullptr) (void)pool.release(p, /*stream=*/1, /*record=*/true);
        },
        [&] { gpu.complete_events(1); });
    last = pool.stats();
  }
  state.counters["locked_peak_GiB"] = static_cast<double>(last.allocated_bytes.peak) / static_cast<double>(gib);
  state.counters["host_allocs"] = static_cast<double>(last.num_host_alloc);
  state.counters["waits"] = static_cast<double>(last.num_waits);
  state.counters["pageable_copies"] = static_cast<double>(fallbacks);
  state.SetItemsProcessed(copies);
}

void BM_HostStaging_pytorch_model(benchmark::State& state) {
  const auto units = weight_units();
  std::int64_t copies = 0;
  pow2_host_cache last;
  for (auto _ : state) {
    pow2_host_cache cache;
    stream_weights(
        units, [&](std::size_t bytes) { ++copies; return cache.acquire(bytes); }, [&](void* p) { cache.release(p); },
        [&] { cache.run_stream(); });
    last = cache;
  }
  state.counters["locked_peak_GiB"] = static_cast<double>(last.locked_bytes) / static_cast<double>(gib);
  state.counters["host_allocs"] = static_cast<double>(last.num_host_alloc);
  state.SetItemsProcessed(copies);
}

BENCHMARK(BM_HostStaging_phasealloc)->ArgName("budget_MiB")->Arg(1024)->Arg(1536)->Arg(2048)->Arg(4096)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HostStaging_pytorch_model)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
