#include "phasealloc/synth/presets.hpp"

#include <string>
#include <utility>

#include <fmt/format.h>

namespace phasealloc {
namespace {

model_desc opt(std::size_t layers, std::size_t hidden, std::size_t heads, std::size_t ffn) {
  model_desc d;
  d.family = model_family::opt;
  d.layers = layers;
  d.hidden = hidden;
  d.heads = heads;
  d.kv_heads = heads;
  d.ffn_hidden = ffn;
  d.vocab = 50272;
  d.max_positions = 2048;
  return d;
}

model_desc llama(std::size_t layers, std::size_t hidden, std::size_t heads, std::size_t kv_heads, std::size_t ffn) {
  model_desc d;
  d.family = model_family::llama;
  d.layers = layers;
  d.hidden = hidden;
  d.heads = heads;
  d.kv_heads = kv_heads;
  d.ffn_hidden = ffn;
  d.vocab = 32000;
  d.max_positions = 4096;
  return d;
}

// GPT-2 as Hugging Face builds it from GPT2Config(n_layer, n_embd, n_head): ffn 4 x hidden,
// vocab 50257, 1024 positions, NewGELU.
model_desc gpt2(std::size_t layers, std::size_t hidden, std::size_t heads) {
  model_desc d = opt(layers, hidden, heads, 4 * hidden);
  d.family = model_family::gpt2;
  d.vocab = 50257;
  d.max_positions = 1024;
  return d;
}

const model_desc opt_125m = opt(12, 768, 12, 3072);
const model_desc opt_350m = opt(24, 1024, 16, 4096);
const model_desc opt_1_3b = opt(24, 2048, 32, 8192);
const model_desc llama_7b = llama(32, 4096, 32, 32, 11008);     // Llama-2-7B
const model_desc llama_1_1b = llama(22, 2048, 32, 4, 5632);     // TinyLlama-1.1B

rlhf_job ppo_125m() {
  rlhf_job j;
  j.name = "ppo-125m";
  j.actor = j.critic = j.reference = j.reward = opt_125m;
  j.batch = 8;
  j.prompt_len = 128;
  j.gen_len = 128;
  j.iterations = 4;
  j.ppo_epochs = 2;
  j.micro_batch = 4;
  j.inference_micro_batch = 4;
  return j;
}

rlhf_job ppo_1_3b() {
  rlhf_job j;
  j.name = "ppo-1.3b";
  j.actor = j.reference = opt_1_3b;
  j.critic = j.reward = opt_350m;
  j.batch = 16;
  j.generation_batch = 8;
  j.prompt_len = 256;
  j.gen_len = 256;
  j.iterations = 2;
  j.ppo_epochs = 1;
  j.micro_batch = 4;
  j.inference_micro_batch = 8;
  return j;
}

rlhf_job ppo_1_3b_offload() {
  rlhf_job j = ppo_1_3b();
  j.name = "ppo-1.3b-offload";
  j.offload_optimizer = true;
  j.offload_params = true;
  return j;
}

rlhf_job ppo_7b() {
  rlhf_job j;
  j.name = "ppo-7b";
  j.actor = j.reference = llama_7b;
  j.critic = j.reward = llama_1_1b;
  j.batch = 16;
  j.prompt_len = 512;
  j.gen_len = 256;
  j.iterations = 2;
  j.ppo_epochs = 1;
  j.micro_batch = 2;
  j.inference_micro_batch = 4;
  j.gradient_checkpointing = true;
  j.flash_attention = true;
  j.offload_optimizer = true;
  j.offload_params = true;
  return j;
}

// The jobs of bench/gpu/rlhf_job.py (tools/data/real): one model size for all four roles, bf16
// without fp32 masters, 8 prompts of 128 tokens and 128 new ones, two minibatches per step each
// in one forward / backward, SDPA attention, log-probs of the response positions taken straight
// from the call's .logits, both losses through one backward, one AdamW over actor and critic,
// actor and critic in train mode (dropout on).
// GRPO: 4 answers per prompt (32 rows), no critic. The offload variants move the reference
// model, or AdamW's states, between host and GPU whole, as the job's --offload does.
rlhf_job rlhf_job_py(std::string name, const model_desc& model, bool grpo, std::size_t steps) {
  rlhf_job j;
  j.name = std::move(name);
  j.actor = j.critic = j.reference = j.reward = model;
  j.batch = grpo ? 32 : 8;
  j.prompt_len = 128;
  j.gen_len = 128;
  j.iterations = steps;
  j.ppo_epochs = 1;
  j.mini_batch = j.batch / 2;
  j.micro_batch = j.batch / 2;
  j.inference_micro_batch = j.batch;
  j.master_weights = false;
  j.flash_attention = true;
  j.response_logprobs = true;
  j.joint_backward = true;
  j.shared_optimizer = true;
  j.keep_model_output = false;
  j.with_critic = !grpo;
  j.prefill_cache_copy = true;
  j.dropout = true;  // the job never calls actor.eval(): GPT-2's dropout (p = 0.1) is on throughout
  return j;
}

const model_desc gpt2_small = gpt2(12, 768, 12);
const model_desc gpt2_1_3b = gpt2(24, 2048, 16);

rlhf_job ppo_gpt2_small() { return rlhf_job_py("ppo-gpt2-small", gpt2_small, false, 4); }
rlhf_job ppo_gpt2_1_3b() { return rlhf_job_py("ppo-gpt2-1.3b", gpt2_1_3b, false, 3); }
rlhf_job grpo_gpt2_small() { return rlhf_job_py("grpo-gpt2-small", gpt2_small, true, 4); }
rlhf_job grpo_gpt2_1_3b() { return rlhf_job_py("grpo-gpt2-1.3b", gpt2_1_3b, true, 3); }
rlhf_job ppo_gpt2_1_3b_offload_reference() {
  rlhf_job j = rlhf_job_py("ppo-gpt2-1.3b-offload-reference", gpt2_1_3b, false, 3);
  j.offload_reference = true;
  return j;
}
// --lora: PEFT adapters of rank 16 on GPT-2's c_attn and c_proj, Llama's q/k/v/o projections.
rlhf_job ppo_gpt2_small_lora() {
  rlhf_job j = rlhf_job_py("ppo-gpt2-small-lora", gpt2_small, false, 4);
  j.lora_rank = 16;
  j.lora_targets = {"qkv", "o", "down"};
  return j;
}
rlhf_job ppo_llama_7b_lora() {
  rlhf_job j = rlhf_job_py("ppo-llama-7b-lora", llama_7b, false, 2);
  j.lora_rank = 16;
  j.lora_targets = {"q", "k", "v", "o"};
  return j;
}
rlhf_job ppo_gpt2_small_offload_optimizer() {
  rlhf_job j = rlhf_job_py("ppo-gpt2-small-offload-optimizer", gpt2_small, false, 4);
  j.optimizer_states_on_host = true;
  return j;
}

struct named_preset {
  std::string_view name;
  rlhf_job (*make)();
};

constexpr named_preset presets[] = {
    {"ppo-125m", ppo_125m},
    {"ppo-1.3b", ppo_1_3b},
    {"ppo-1.3b-offload", ppo_1_3b_offload},
    {"ppo-7b", ppo_7b},
    {"ppo-gpt2-small", ppo_gpt2_small},
    {"ppo-gpt2-1.3b", ppo_gpt2_1_3b},
    {"grpo-gpt2-small", grpo_gpt2_small},
    {"grpo-gpt2-1.3b", grpo_gpt2_1_3b},
    {"ppo-gpt2-1.3b-offload-reference", ppo_gpt2_1_3b_offload_reference},
    {"ppo-gpt2-small-offload-optimizer", ppo_gpt2_small_offload_optimizer},
    {"ppo-gpt2-small-lora", ppo_gpt2_small_lora},
    {"ppo-llama-7b-lora", ppo_llama_7b_lora},
};

}  // namespace

std::vector<std::string_view> preset_names() {
  std::vector<std::string_view> names;
  for (const named_preset& p : presets) names.push_back(p.name);
  return names;
}

result<rlhf_job, std::string> preset(std::string_view name) {
  for (const named_preset& p : presets) {
    if (p.name == name) return p.make();
  }
  return fmt::format("unknown synth preset '{}'; presets: {}", name, fmt::join(preset_names(), ", "));
}

}  // namespace phasealloc
