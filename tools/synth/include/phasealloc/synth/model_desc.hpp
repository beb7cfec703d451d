// A decoder-only transformer, described by the numbers that decide its tensor sizes.
//
// Design note
// Rationale: the allocator sees tensor sizes, not architectures. Two families cover the models
//   RLHF recipes use on one GPU: `llama` (RMSNorm computed in fp32, rotary positions, SwiGLU
//   MLP, no biases, untied head: Llama / Mistral / Qwen-style) and `opt` (fused LayerNorm,
//   learned positions, ReLU MLP, biases everywhere, tied head: OPT / GPT-2-style, what
//   DeepSpeed-Chat's recipes use). `gpt2` is opt's layout with a fused q / k / v projection
//   (c_attn, whose split q, k and v are views of one tensor) and GPT-2's MLP activation, HF's
//   NewGELUActivation: a Python tanh formula of seven elementwise ops, four of whose ffn-wide
//   results autograd keeps for backward where ReLU keeps one (on GPT-2 small at 4 x 256 tokens
//   that is ~290 MiB more per trained model). The family decides the parameter list and the per-op
//   intermediates; the dimensions below decide every size.
// Limitations: no mixture-of-experts, no encoder-decoder, no sliding-window attention; OPT-350m's
//   512-wide projections and post-LayerNorm are not modelled (its sizes differ by a few percent).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace phasealloc {

enum class model_family { llama, opt, gpt2 };

std::string_view to_string(model_family family) noexcept;
std::optional<model_family> parse_model_family(std::string_view name) noexcept;

struct model_desc {
  model_family family = model_family::llama;
  std::size_t layers = 0;
  std::size_t hidden = 0;
  std::size_t heads = 0;
  std::size_t kv_heads = 0;         ///< == heads for multi-head attention, fewer for GQA.
  std::size_t ffn_hidden = 0;
  std::size_t vocab = 0;
  std::size_t max_positions = 2048; ///< Learned position-embedding rows (opt: 2 more; gpt2).
  std::size_t bytes_per_param = 2;  ///< 2 for bf16 / fp16, 4 for fp32; also the activation dtype.

  std::size_t head_dim() const noexcept { return heads == 0 ? 0 : hidden / heads; }
};

/// Which of the four RLHF models a description is used as: decides the output head.
/// actor and reference end in an LM head (vocab logits); critic and reward in a scalar head.
enum class model_role { actor, critic, reference, reward };

std::string_view to_string(model_role role) noexcept;

/// Parameters (elements) of `desc` used as `role`, including the head, excluding buffers.
std::size_t parameter_count(const model_desc& desc, model_role role);

}  // namespace phasealloc
