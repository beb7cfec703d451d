// How long a simulated kernel or copy takes: timestamps for synthesized traces.
//
// Design note
// Rationale: a replay orders events by time and some policies look at gaps (idle periods,
//   phase lengths), so time must be plausible, not exact. A roofline with a launch floor is
//   enough: decode steps of small models are launch-bound (tens of microseconds per layer),
//   prefill and training matmuls FLOP-bound, optimizer steps bandwidth-bound, offload PCIe-bound.
// Approach: op time = max(flops / effective peak, bytes / effective HBM bandwidth) + launch
//   overhead; copies time = bytes / effective PCIe bandwidth. Constants: an A100-80GB-class GPU
//   (312 TFLOP/s bf16 at 45% efficiency, 2.0 TB/s at 75%, PCIe 4.0 x16 at ~20 GB/s) driven
//   from eager PyTorch (~10 us per op of Python + dispatch + launch, which puts HF decode of a 7B
//   model near the 20-30 ms per token it shows), plus ~1 ms of generate()'s own Python per token.
// Limitations: no overlap of copies with compute, no CPU-side work (tokenisation, Python loops
//   over scalars), no contention; every op costs at least the launch overhead.
#pragma once

#include <cstdint>

namespace phasealloc::detail::synth {

struct cost_model {
  double flops_per_s = 312e12 * 0.45;
  double hbm_bytes_per_s = 2.0e12 * 0.75;
  double pcie_bytes_per_s = 20e9;
  std::uint64_t op_overhead_ns = 10'000;
  std::uint64_t generate_step_overhead_ns = 1'000'000;  ///< generate()'s Python per token.

  std::uint64_t op_ns(double flops, double bytes) const noexcept;
  std::uint64_t copy_ns(double bytes) const noexcept;
};

}  // namespace phasealloc::detail::synth
