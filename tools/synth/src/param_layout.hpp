// The parameter tensors of a model, in the order Hugging Face registers (and so loads and
// iterates) them, with the indices each layer's ops refer to.
//
// Design note
// Rationale: a model is loaded tensor by tensor (from_pretrained then .to("cuda"), or
//   device_map loading), its grads appear tensor by tensor in backward, its Adam states are
//   created tensor by tensor in the first step, and zero_grad frees them in this order. The
//   allocator sees hundreds of differently sized long-lived blocks, not one flat buffer.
// Approach: `llama`: embed_tokens; per layer q, k, v, o, gate, up, down, input_layernorm,
//   post_attention_layernorm; norm; lm_head (actor / reference) or score (critic / reward).
//   `opt`: embed_tokens, embed_positions, final_layer_norm (OPTDecoder registers it before its
//   layers); per layer k, v, q, out_proj (weight, bias each), self_attn_layer_norm, fc1, fc2,
//   final_layer_norm (weight, bias each); the LM head is tied to embed_tokens (no tensor), the
//   scalar head is DeepSpeed-Chat's v_head. Matrices decay; biases and norms do not (HF Trainer's
//   two parameter groups).
// Limitations: no quantised or LoRA parameters.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "autograd.hpp"
#include "phasealloc/synth/model_desc.hpp"

namespace phasealloc::detail::synth {

struct param_tensor {
  std::size_t numel = 0;
  bool decay = true;      ///< In the weight-decay parameter group.
  bool trainable = true;  ///< false: a frozen base weight under LoRA.
  bool adapter = false;   ///< A LoRA matrix (created after the base models are loaded).
  std::size_t elem_bytes = 0;  ///< 0: the model's dtype; LoRA matrices may differ (fp32).
};

struct linear_params {
  std::size_t weight = no_param;
  std::size_t bias = no_param;
  std::size_t in = 0;
  std::size_t out = 0;
  std::size_t lora_a = no_param;  ///< LoRA: in x rank (no_param: no adapter).
  std::size_t lora_b = no_param;  ///< LoRA: rank x out.
  std::size_t lora_rank = 0;
  std::size_t lora_elem_bytes = 0;  ///< The adapters' dtype.
};

/// LoRA adapters of a trained model: rank and the linears they wrap (synth's names).
struct lora_spec {
  std::size_t rank = 0;
  std::vector<std::string> targets;
  std::size_t elem_bytes = 4;  ///< PEFT's autocast_adapter_dtype: fp32 adapters on a bf16 / fp16 base.
};

struct norm_params {
  std::size_t weight = no_param;
  std::size_t bias = no_param;
};

struct layer_params {
  norm_params attn_norm;
  norm_params mlp_norm;
  linear_params q, k, v, o;
  linear_params qkv;             ///< gpt2: c_attn, the fused q / k / v projection (q, k, v unused).
  linear_params gate, up, down;  ///< opt: up = fc1, down = fc2, no gate.
  std::size_t first = 0;         ///< The layer's params are [first, last).
  std::size_t last = 0;
};

struct param_layout {
  std::vector<param_tensor> params;
  std::size_t embed = no_param;
  std::size_t positions = no_param;  ///< opt only.
  std::vector<layer_params> layers;
  norm_params final_norm;
  linear_params head;                ///< lm_head (weight == embed when tied) or scalar head.
  bool tied_head = false;
  bool lm_head = false;              ///< true: vocab logits; false: one value per token.
  std::size_t buffer_bytes = 0;      ///< Non-parameter buffers loaded with the model (rotary inv_freq).

  std::size_t total_numel() const noexcept;
};

/// The parameters of `desc` used as `role`; with `lora` (rank > 0) the base is frozen, and
/// adapters follow every parameter of the base, layer by layer, in the order PEFT creates them.
param_layout make_layout(const model_desc& desc, model_role role, const lora_spec& lora = {});

}  // namespace phasealloc::detail::synth
