// What `phasealloc synth` simulates: one GPU running a PPO job of four models, Hugging Face style
// (TRL / OpenRLHF / DeepSpeed-Chat colocated on a single device).
//
// One iteration:
//   generation  HF generate() of `batch` prompts, `generation_batch` sequences per call, with a
//               dynamic KV cache regrown by torch.cat every decode step.
//   inference   no_grad scoring of the rollout, `inference_micro_batch` sequences at a time:
//               actor (old log-probs), reference (log-probs), critic (values), reward (score),
//               then rewards and GAE advantages.
//   training    ppo_epochs x (batch / mini_batch) mini-batches of (mini_batch / micro_batch)
//               micro-steps: actor then critic forward + backward, gradients accumulated;
//   optimizer   after every mini-batch, for actor then critic: clip_grad_norm_, AdamW step,
//               zero_grad(set_to_none=True).
// So an iteration's phases read generation, inference, then (training, optimizer) once per
// mini-batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>
#include <variant>

#include "phasealloc/status.hpp"
#include "phasealloc/synth/model_desc.hpp"

namespace phasealloc {

struct rlhf_job {
  std::string name = "custom";  ///< Preset name, recorded in the trace metadata.
  model_desc actor;
  model_desc critic;
  model_desc reference;
  model_desc reward;

  std::size_t batch = 8;                  ///< Prompts (rollout sequences) per iteration.
  std::size_t generation_batch = 0;       ///< Sequences per generate() call; 0 (or more than batch) = batch.
  std::size_t prompt_len = 128;           ///< Longest prompt; each batch pads to its longest draw.
  std::size_t gen_len = 128;              ///< max_new_tokens; a batch stops when all hit EOS.
  std::size_t iterations = 4;
  std::size_t ppo_epochs = 1;
  std::size_t mini_batch = 0;             ///< Sequences per optimizer step; 0 (or more than batch) = batch.
  std::size_t micro_batch = 2;            ///< Sequences per training forward / backward.
  std::size_t inference_micro_batch = 0;  ///< Sequences per scoring forward; 0 = micro_batch; at most batch.

  bool gradient_checkpointing = false;    ///< Keep only layer inputs; recompute in backward.
  bool flash_attention = false;           ///< Flash / SDPA kernels (no L x L scores) vs eager.
  bool master_weights = true;             ///< fp32 master copies of trained params (bf16 / fp16 models).
  bool offload_optimizer = false;         ///< AdamW states + masters on CPU, streamed through GPU chunks.
  bool offload_params = false;            ///< Reference / reward weights on CPU, streamed per layer.
  bool empty_cache_at_phases = false;     ///< The job calls torch.cuda.empty_cache() at every phase change.
  /// Log-probs from the response positions' logits only (TRL: logits[:, context - 1 : -1] before
  /// log_softmax), instead of every position's (DeepSpeed-Chat: logits[:, :-1], then sliced).
  bool response_logprobs = false;
  /// The actor's and the critic's losses are summed and go through one backward (TRL, and the
  /// usual hand-written loop), so both forwards' activations are alive at once; autograd then
  /// runs the critic's (later-built) graph first. Otherwise each model steps on its own
  /// (DeepSpeed-Chat, OpenRLHF).
  bool joint_backward = false;
  /// One AdamW over the actor's and the critic's parameters in one group, without gradient
  /// clipping (`AdamW(actor_params + critic_params)` in a hand-written loop): its foreach step
  /// allocates the sqrt list of both models' states at once. Otherwise each model has its own
  /// AdamW with decay / no-decay groups after clip_grad_norm_ (DeepSpeed-Chat, OpenRLHF).
  bool shared_optimizer = false;
  /// false: no value model (GRPO, RLOO, ReMax): the critic is neither loaded, nor scored, nor
  /// trained; advantages come from the rewards alone.
  bool with_critic = true;
  /// true: scoring keeps the forward's output object (`output = model(...)`, then
  /// output.logits), so the DynamicCache HF returns with the logits lives until the log-probs
  /// are taken (DeepSpeed-Chat, TRL). false: `.logits` is taken from the call itself and the
  /// cache dies before the log-probs (a hand-written one-liner).
  bool keep_model_output = true;
  /// The reference model lives on the host and moves to the GPU whole for its scoring forward
  /// (`reference.to("cuda")`, forward, `reference.to("cpu")`): one allocation per parameter in,
  /// all freed after. offload_params instead streams reference and reward layer by layer.
  bool offload_reference = false;
  /// AdamW's states live on the host between steps and move to the GPU whole around each
  /// optimizer.step() (every state tensor `.to("cuda")`, step, zero_grad, `.to("cpu")`); the
  /// first step creates them on the GPU. offload_optimizer instead streams fp32 chunks.
  bool optimizer_states_on_host = false;
  /// LoRA (PEFT): > 0 wraps the actor and the critic's body in rank-`lora_rank` adapters on the
  /// linears named in `lora_targets`; their base weights are frozen (no grads, no AdamW states,
  /// and a frozen linear keeps no input for backward), the adapters and the critic's value head
  /// train. The reference is then the actor's base with its adapters disabled: not loaded.
  std::size_t lora_rank = 0;
  /// HF's DynamicCache copies the prefill's K and V into the cache (transformers >= 4.56:
  /// torch.cat onto an empty tensor) instead of keeping the projections themselves (4.4x).
  bool prefill_cache_copy = false;
  /// The trained models (actor, critic) run in train mode with their dropout layers on (HF's
  /// GPT-2 / OPT configs: p = 0.1 after the embeddings, the attention output projection and the
  /// MLP), in every forward: nn.Dropout keeps a one-byte mask per element for backward. Attention
  /// dropout inside SDPA's fused kernels keeps no mask and is not modelled.
  bool dropout = false;
  /// Linears that get adapters, by synth's names: q, k, v, o, gate, up, down. GPT-2's c_attn is
  /// q, k and v (one adapter there; three here, whose A matrices are 3 x hidden x rank instead
  /// of hidden x rank), its c_proj are o and down.
  std::vector<std::string> lora_targets{"q", "k", "v", "o"};
  std::size_t offload_chunk_bytes = std::size_t{64} << 20;  ///< fp32 bytes per optimizer chunk buffer.

  std::size_t device_capacity_bytes = std::size_t{80} << 30;  ///< Recorded in the trace metadata.
  std::size_t max_events = 40'000'000;    ///< synthesize() refuses to build a bigger trace.
  std::uint64_t seed = 1;                 ///< Prompt and response lengths are drawn from it.

  // The batch sizes in use: 0 picks the default, and none exceeds `batch`.
  std::size_t effective_generation_batch() const noexcept { return clamp_to_batch(generation_batch, batch); }
  std::size_t effective_mini_batch() const noexcept { return clamp_to_batch(mini_batch, batch); }
  std::size_t effective_inference_micro_batch() const noexcept {
    return clamp_to_batch(inference_micro_batch ? inference_micro_batch : micro_batch, batch);
  }

 private:
  static std::size_t clamp_to_batch(std::size_t size, std::size_t batch) noexcept {
    return size == 0 || size > batch ? batch : size;
  }
};

/// The description `role` uses in `job`.
const model_desc& model_of(const rlhf_job& job, model_role role) noexcept;
model_desc& model_of(rlhf_job& job, model_role role) noexcept;

/// Checks that every size is positive and within its bound (layers <= 1024, vocab <= 2^24, batch
/// <= 2^16, prompt_len and gen_len <= 2^20, max_events <= 10^8, no tensor above 1 PiB, ...), and that
/// the batch sizes divide; the error names the key (the parse_job key, e.g. "micro_batch" or
/// "actor.heads") and the bound. Nothing is allocated before it passes.
result<std::monostate, std::string> validate_job(const rlhf_job& job);

}  // namespace phasealloc
