// Same-address offload at link speed: cuda_vmm_device::offload + restore of 1-32 GiB against a plain
// pinned copy of the same bytes, measured in the same run, on device 0 (a GPU: bench/gpu/device_run.sh
// runs it with OFFLOAD_BENCH set; or simcuda, preloaded as ctest's offload_bench_on_simcuda does).
//
// Layouts: the blocks an RLHF job offloads, packed as an allocator places them (each block rounded
// up to 512 bytes, so its live bytes end before the next block starts):
//   adam_layer   Adam's two fp32 states of one Llama-7B MLP weight (2 x 4096 x 11008 x 4 bytes)
//   kv_pages     2 MiB KV-cache pages
//   small        64 KiB buffers (norms, biases, small activations kept for backward)
// Counters (per direction): GB/s of the live bytes moved, the plain pinned copy's GB/s of the same
// bytes (cudaMemcpyAsync into/out of one cudaHostAlloc buffer, the best a copy can do), their ratio,
// the driver's VMM calls (cuMemCreate + cuMemMap + cuMemUnmap, counted by simcuda; -1 on a GPU,
// where the driver does not tell) per GiB of range offloaded and restored, for the first cycle (the
// pages map() made, a handle each) and for the cycles after it (the chunks a restore made), and the
// host bytes held (behind the range and kept for reuse) per live byte offloaded.
// Three iterations each: the first offload pins its host memory, the next two reuse it. The goal on a GPU: >= 0.85 of the plain copy.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "phasealloc/devices/cuda_vmm_device.hpp"
#include "simcuda/introspect.h"

namespace {

using phasealloc::byte_range;
using phasealloc::cuda_vmm_device;
using phasealloc::device_address;
using phasealloc::errc;
using phasealloc::gib;

struct layout {
  const char* name;
  std::size_t block_bytes;
};
constexpr layout layouts[] = {{"adam_layer", 2 * std::size_t{4096} * 11008 * 4}, {"kv_pages", 2u << 20},
                              {"small", 64u << 10}};

/// simcuda's count of cuMemCreate + cuMemMap + cuMemUnmap calls, or -1 when not on simcuda (looked
/// up at run time: the bench links the real CUDA runtime, which the simulator replaces when preloaded).
double vmm_calls() {
  using get_fn = int (*)(simcuda_counters*, std::size_t);
  static const auto get = reinterpret_cast<get_fn>(dlsym(RTLD_DEFAULT, "simcuda_get_counters"));
  if (get == nullptr) return -1;
  simcuda_counters c{};
  if (get(&c, sizeof c) != 0) return -1;
  return static_cast<double>(c.vmm_creates + c.vmm_maps + c.vmm_unmaps);
}

/// A device that cannot be made, or cannot offload: skipped, or (PHASEALLOC_BENCH_REQUIRE_DEVICE=1,
/// the simulator run in ctest) a failure of the whole run.
void refuse(benchmark::State& state, const std::string& why) {
  if (std::getenv("PHASEALLOC_BENCH_REQUIRE_DEVICE") != nullptr) {
    std::fprintf(stderr, "offload_bench: %s\n", why.c_str());
    std::exit(1);
  }
  state.SkipWithError(why.c_str());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void offload_and_restore(benchmark::State& state) {
  const layout& shape = layouts[state.range(0)];
  const std::size_t bytes = static_cast<std::size_t>(state.range(1)) * gib;
  std::string why;
  auto made = cuda_vmm_device::create(0, {}, &why);
  if (!made) return refuse(state, "no cuda_vmm device: " + why);
  std::unique_ptr<cuda_vmm_device> dev = std::move(made).value();
  if (!dev->caps().has_host_backing) return refuse(state, "the driver cannot back device addresses with host memory");
  if (3 * bytes > dev->caps().capacity_bytes) return state.SkipWithError("larger than a third of the device");

  const device_address base = dev->reserve(bytes).value();
  if (dev->map(base, bytes) != errc::ok) return refuse(state, dev->last_failure());
  std::vector<byte_range> live;  // each block's live bytes: its size less up to 511 bytes of rounding
  const std::size_t block = (shape.block_bytes + 511) / 512 * 512;
  for (device_address at = base; at + block <= base + bytes; at += block) live.push_back({at, shape.block_bytes - 100});
  std::size_t live_bytes = 0;
  for (const byte_range& r : live) live_bytes += r.bytes;
  (void)cudaMemset(reinterpret_cast<void*>(base), 1, bytes);

  void* pinned = nullptr;
  if (cudaHostAlloc(&pinned, live_bytes, cudaHostAllocDefault) != cudaSuccess) return refuse(state, "cudaHostAlloc failed");
  cudaStream_t stream = nullptr;
  (void)cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

  double to_host_s = 0, to_device_s = 0, pinned_d2h_s = 0, pinned_h2d_s = 0, calls = 0, first_calls = -1,
         host_ratio = 0;
  for (auto _ : state) {
    (void)_;
    const double calls_before = vmm_calls();
    auto start = std::chrono::steady_clock::now();
    if (dev->offload(base, bytes, live, {}) != errc::ok) return refuse(state, "offload: " + dev->last_failure());
    to_host_s += seconds_since(start);
    host_ratio = static_cast<double>(dev->host_held_bytes()) / static_cast<double>(live_bytes);
    start = std::chrono::steady_clock::now();
    if (dev->restore(base, bytes, live, {}) != errc::ok) return refuse(state, "restore: " + dev->last_failure());
    to_device_s += seconds_since(start);
    // The first cycle unmaps the pages map() made, one handle each; a restored range comes back in
    // chunks (cuda_vmm_options::restore_chunk_bytes), so later cycles move whole chunks.
    const double cycle_calls = calls_before < 0 ? -1 : vmm_calls() - calls_before;
    if (first_calls < 0 && cycle_calls >= 0 && calls == 0) {
      first_calls = cycle_calls;
    } else {
      calls += cycle_calls;
    }

    // The plain pinned copy of the same live bytes, one cudaMemcpyAsync per block.
    start = std::chrono::steady_clock::now();
    std::size_t offset = 0;
    for (const byte_range& r : live) {
      (void)cudaMemcpyAsync(static_cast<char*>(pinned) + offset, reinterpret_cast<void*>(r.addr), r.bytes,
                            cudaMemcpyDeviceToHost, stream);
      offset += r.bytes;
    }
    (void)cudaStreamSynchronize(stream);
    pinned_d2h_s += seconds_since(start);
    start = std::chrono::steady_clock::now();
    offset = 0;
    for (const byte_range& r : live) {
      (void)cudaMemcpyAsync(reinterpret_cast<void*>(r.addr), static_cast<char*>(pinned) + offset, r.bytes,
                            cudaMemcpyHostToDevice, stream);
      offset += r.bytes;
    }
    (void)cudaStreamSynchronize(stream);
    pinned_h2d_s += seconds_since(start);
  }
  const double n = static_cast<double>(state.iterations());
  const double moved = static_cast<double>(live_bytes) * n;
  state.counters["to_host_GBps"] = moved / to_host_s / 1e9;
  state.counters["to_device_GBps"] = moved / to_device_s / 1e9;
  state.counters["pinned_d2h_GBps"] = moved / pinned_d2h_s / 1e9;
  state.counters["pinned_h2d_GBps"] = moved / pinned_h2d_s / 1e9;
  state.counters["to_host_vs_pinned"] = pinned_d2h_s / to_host_s;
  state.counters["to_device_vs_pinned"] = pinned_h2d_s / to_device_s;
  const double range_gib = static_cast<double>(bytes) / gib;
  state.counters["vmm_calls_per_GiB_first"] = first_calls < 0 ? -1 : first_calls / range_gib;
  state.counters["vmm_calls_per_GiB"] = calls < 0 || n < 2 ? -1 : calls / (n - 1) / range_gib;
  state.counters["host_bytes_per_offloaded_byte"] = host_ratio;
  state.counters["live_GiB"] = static_cast<double>(live_bytes) / gib;
  state.SetLabel(shape.name);

  (void)cudaStreamDestroy(stream);
  (void)cudaFreeHost(pinned);
  (void)dev->unmap(base, bytes);
  (void)dev->release(base, bytes);
}

BENCHMARK(offload_and_restore)
    ->ArgNames({"layout", "GiB"})
    ->ArgsProduct({{0, 1, 2}, {1, 4, 16, 32}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
