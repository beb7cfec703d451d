// One transformer decoder layer's forward, written like the Hugging Face modeling code it
// imitates: every intermediate the Python creates is allocated, and dropped where the Python
// drops its reference (saved ones live on in the autograd graph).
//
// Design note
// Rationale: per-op intermediates are what make training and decode traces look real: the fp32
//   RMSNorm upcasts, rotate_half's cat, eager attention's four L x L tensors, SwiGLU's three
//   ffn-wide ones; in decode thousands of sub-megabyte tensors per token.
// Approach: llama follows LlamaDecoderLayer / LlamaRMSNorm / apply_rotary_pos_emb /
//   eager_attention_forward (transformers 4.4x); opt follows OPTDecoderLayer (pre-LayerNorm).
//   Attention is shared: a KV cache (generation) is regrown by torch.cat each step
//   (DynamicCache.update; the prefill's K and V are the projections themselves in 4.4x, a copy
//   with rlhf_job::prefill_cache_copy as in >= 4.56); GQA repeats K / V for eager attention; flash attention keeps q, k, v,
//   its output and logsumexp instead of the L x L scores.
// Limitations: no dropout; OPT's q scaling is folded into the attention scaling.
#pragma once

#include <cstddef>

#include "autograd.hpp"
#include "param_layout.hpp"
#include "phasealloc/synth/model_desc.hpp"

namespace phasealloc::detail::synth {

/// One layer's K and V in a dynamic cache (None before prefill).
struct kv_slot {
  tensor k;
  tensor v;
};

/// Model-level tensors the layers read, outside autograd: rotary cos / sin, the 4-D mask.
struct shared_inputs {
  tensor cos;
  tensor sin;
  tensor mask;
};

struct layer_env {
  const model_desc* desc = nullptr;
  const layer_params* params = nullptr;
  std::size_t batch = 0;
  std::size_t q_len = 0;   ///< New tokens per sequence.
  std::size_t kv_len = 0;  ///< Keys per sequence, cache included (= q_len without a cache).
  bool flash = false;
  kv_slot* cache = nullptr;
  bool cache_copies_prefill = false;  ///< The first cache update copies (transformers >= 4.56).
  bool dropout = false;               ///< Residual dropout after the projections (opt / gpt2).
  shared_inputs shared;

  std::size_t tokens() const noexcept { return batch * q_len; }
};

/// The layer's output; consumes (drops) `x`.
tensor transformer_layer(graph& g, const layer_env& env, tensor x);

tensor llama_layer(graph& g, const layer_env& env, tensor x);
tensor opt_layer(graph& g, const layer_env& env, tensor x);

/// Self-attention from projected q (rotated), k, v of the new tokens to the contiguous
/// (batch, q_len, heads * head_dim) output; consumes q, k, v.
tensor attention(graph& g, const layer_env& env, tensor q, tensor k, tensor v);

/// The attention half of a pre-norm decoder layer after q, k, v: attention, output projection,
/// residual add. Returns the new hidden states; consumes x, q, k, v.
tensor attention_residual(graph& g, const layer_env& env, tensor x, tensor q, tensor k, tensor v);

/// Tag of the k / v projections: prefill writes them straight into the cache, so they are KV
/// allocations from birth; otherwise they are activations.
alloc_tag kv_projection_tag(const layer_env& env) noexcept;

/// nn.Dropout in train mode (native_dropout): the output and a one-byte mask, kept for backward.
/// Consumes x.
tensor dropout(graph& g, tensor x);

/// LlamaRMSNorm: fp32 upcast, pow, mean, rsqrt, scale, downcast, weight.
tensor rms_norm(graph& g, const tensor& x, std::size_t tokens, std::size_t hidden, const norm_params& p);
/// nn.LayerNorm (one fused kernel; keeps mean and rstd for backward).
tensor layer_norm(graph& g, const tensor& x, std::size_t tokens, std::size_t hidden, const norm_params& p);

}  // namespace phasealloc::detail::synth
