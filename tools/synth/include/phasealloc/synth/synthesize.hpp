// `phasealloc synth`'s engine: the allocation trace a Hugging Face-style PPO job would show
// PyTorch's caching allocator, built from a model description instead of recorded on a GPU.
//
// Design note
// Rationale: policies are compared on traces, and real recordings are few, big and tied to one
//   model and one machine. A synthesizer that follows the tensors an RLHF step really creates
//   (per-parameter loads, torch.cat-grown KV caches, autograd-saved activations freed in reverse,
//   lazily created Adam states, foreach temporaries, vocab-sized fp32 logits, offload staging
//   chunks, the KV caches HF returns from scoring forwards, the cuBLAS workspace pinned by the
//   first matmul, experience tensors that outlive their iteration until reassigned) gives traces
//   of any size that stress an allocator the way production does.
// Approach: a small simulator of PyTorch's tensor lifetimes. Every tensor is an allocation with
//   a reference count: the Python variable holds one reference, each autograd node that saves
//   it holds another, a KV cache holds its tensors. Forward code is written like the model's
//   Python (allocate outputs, drop locals), and backward is derived from the tape it records:
//   nodes run in reverse creation order (PyTorch's order for one device), allocate grads of
//   their inputs, accumulate into existing grads, release what they saved. Gradient
//   checkpointing records one node per layer that re-runs the layer's forward in backward.
//   Timestamps come from a FLOP / bandwidth / launch-overhead model of an A100-class GPU.
//   Per-iteration variation (prompt padding, EOS-driven response lengths) comes from `seed`.
//   Files: model_state / param_layout (weights), autograd + ops + layers + model_forward (the
//   tensor simulator), one file per phase, param_stream (offloaded weights), rollout_plan (shapes).
// Limitations: one device, one process; no tensor / pipeline parallelism, no ZeRO partitioning
//   beyond the offload modes; vLLM / SGLang engines (sleep / wake pools) are not modelled;
//   dropout is off (RLHF recipes disable it); the tiny CPU-side tensors of Python code
//   (scalars, step counters) are not on the GPU and are not in the trace.
#pragma once

#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/synth/alloc_tag.hpp"
#include "phasealloc/synth/rlhf_job.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc {

/// The phases of an RLHF iteration, exactly as synthesized traces name them in phase events.
namespace rlhf_phase {
inline constexpr std::string_view generation = "generation";
inline constexpr std::string_view inference = "inference";
inline constexpr std::string_view training = "training";
inline constexpr std::string_view optimizer = "optimizer";
}  // namespace rlhf_phase

/// The trace of `job`, or an error naming the bad key (validate_job) or the event limit.
/// Deterministic: the same job gives the same trace, byte for byte.
result<trace, std::string> synthesize(const rlhf_job& job);

}  // namespace phasealloc
