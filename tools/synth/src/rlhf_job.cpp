#include "phasealloc/synth/rlhf_job.hpp"

#include <fmt/format.h>

#include <initializer_list>

namespace phasealloc {
namespace {

// Bounds on the description, checked before anything is allocated: each is far above any model or
// job one GPU runs, and together they keep every size the synthesizer computes far from overflow.
constexpr std::size_t max_layers = 1024;
constexpr std::size_t max_width = std::size_t{1} << 20;        // hidden, ffn_hidden
constexpr std::size_t max_heads = 4096;
constexpr std::size_t max_vocab = std::size_t{1} << 24;
constexpr std::size_t max_tokens = std::size_t{1} << 20;       // prompt_len, gen_len, max_positions
constexpr std::size_t max_batch = std::size_t{1} << 16;
constexpr std::size_t max_iterations = 100'000;
constexpr std::size_t max_ppo_epochs = 1'000;
constexpr std::size_t max_trace_events = 100'000'000;          // about 4 GB of events in memory
constexpr std::size_t max_bytes = std::size_t{1} << 50;        // 1 PiB: capacities, chunks, one tensor

struct bounded {
  std::string_view key;
  std::size_t value;
  std::size_t max;
};

std::string check_bounds(std::string_view prefix, std::initializer_list<bounded> items) {
  for (const bounded& b : items) {
    if (b.value > b.max) {
      return fmt::format("{}{}{}: {} is above the bound of {}", prefix, prefix.empty() ? "" : ".", b.key, b.value,
                         b.max);
    }
  }
  return {};
}

/// The largest tensors the job makes, in exact arithmetic: none may exceed max_bytes.
std::string check_tensor_sizes(const rlhf_job& job, const model_desc& d, std::string_view who) {
  __extension__ typedef unsigned __int128 wide;  // exact products of up to five bounded sizes
  const wide seq = static_cast<wide>(job.prompt_len) + job.gen_len;
  const wide batch = job.batch;
  struct tensor {
    std::string_view what;
    wide bytes;
  };
  const tensor tensors[] = {
      {"an fp32 embedding (vocab x hidden x 4 B)", wide{d.vocab} * d.hidden * 4},
      {"an fp32 MLP weight (hidden x ffn_hidden x 4 B)", wide{d.hidden} * d.ffn_hidden * 4},
      {"the fp32 logits of a batch (batch x (prompt_len + gen_len) x vocab x 4 B)", batch * seq * d.vocab * 4},
      {"the attention scores of a batch (batch x heads x (prompt_len + gen_len)^2 x 4 B)",
       batch * d.heads * seq * seq * 4},
      {"the KV cache (layers x 2 x batch x (prompt_len + gen_len) x hidden x bytes_per_param)",
       wide{d.layers} * 2 * batch * seq * d.hidden * d.bytes_per_param},
      {"the fp32 weights (layers x (4 hidden^2 + 3 hidden x ffn_hidden) x 4 B)",
       wide{d.layers} * (wide{4} * d.hidden * d.hidden + wide{3} * d.hidden * d.ffn_hidden) * 4},
  };
  for (const tensor& t : tensors) {
    if (t.bytes > max_bytes) {
      return fmt::format("{}: {} would be {:.3g} bytes, above the bound of 1 PiB ({} bytes); lower the sizes", who,
                         t.what, static_cast<double>(t.bytes), max_bytes);
    }
  }
  return {};
}

std::string check_model(const rlhf_job& job, model_role role) {
  const model_desc& d = model_of(job, role);
  const std::string_view who = to_string(role);
  struct positive { std::string_view key; std::size_t value; };
  for (const positive& p : {positive{"layers", d.layers}, positive{"hidden", d.hidden}, positive{"heads", d.heads},
                            positive{"kv_heads", d.kv_heads}, positive{"ffn_hidden", d.ffn_hidden},
                            positive{"vocab", d.vocab}}) {
    if (p.value == 0) return fmt::format("{}.{}: must be at least 1", who, p.key);
  }
  if (std::string problem = check_bounds(who, {{"layers", d.layers, max_layers},
                                               {"hidden", d.hidden, max_width},
                                               {"heads", d.heads, max_heads},
                                               {"kv_heads", d.kv_heads, max_heads},
                                               {"ffn_hidden", d.ffn_hidden, max_width},
                                               {"vocab", d.vocab, max_vocab},
                                               {"max_positions", d.max_positions, max_tokens}});
      !problem.empty()) {
    return problem;
  }
  if (d.bytes_per_param != 1 && d.bytes_per_param != 2 && d.bytes_per_param != 4) {
    return fmt::format("{}.bytes_per_param: {} is not 1, 2 or 4", who, d.bytes_per_param);
  }
  if (d.hidden % d.heads != 0) return fmt::format("{}.heads: {} does not divide hidden {}", who, d.heads, d.hidden);
  if (d.heads % d.kv_heads != 0) {
    return fmt::format("{}.kv_heads: {} does not divide heads {}", who, d.kv_heads, d.heads);
  }
  if (d.family == model_family::llama && d.head_dim() % 2 != 0) {
    return fmt::format("{}.heads: head_dim {} must be even for rotary embeddings", who, d.head_dim());
  }
  if (std::string problem = check_tensor_sizes(job, d, who); !problem.empty()) return problem;
  if (d.family != model_family::llama) {
    if (d.kv_heads != d.heads) {
      return fmt::format("{}.kv_heads: {} models have kv_heads == heads", who, to_string(d.family));
    }
    if (job.prompt_len + job.gen_len > d.max_positions) {
      return fmt::format("{}.max_positions: {} is shorter than prompt_len + gen_len = {}", who, d.max_positions,
                         job.prompt_len + job.gen_len);
    }
  }
  return {};
}

}  // namespace

const model_desc& model_of(const rlhf_job& job, model_role role) noexcept {
  switch (role) {
    case model_role::actor: return job.actor;
    case model_role::critic: return job.critic;
    case model_role::reference: return job.reference;
    case model_role::reward: return job.reward;
  }
  return job.actor;
}

model_desc& model_of(rlhf_job& job, model_role role) noexcept {
  return const_cast<model_desc&>(model_of(static_cast<const rlhf_job&>(job), role));
}

result<std::monostate, std::string> validate_job(const rlhf_job& job) {
  struct positive { std::string_view key; std::size_t value; };
  for (const positive& p : {positive{"batch", job.batch}, positive{"prompt_len", job.prompt_len},
                            positive{"gen_len", job.gen_len}, positive{"iterations", job.iterations},
                            positive{"ppo_epochs", job.ppo_epochs}, positive{"micro_batch", job.micro_batch}}) {
    if (p.value == 0) return fmt::format("{}: must be at least 1", p.key);
  }
  if (std::string problem = check_bounds({}, {{"batch", job.batch, max_batch},
                                              {"generation_batch", job.generation_batch, max_batch},
                                              {"mini_batch", job.mini_batch, max_batch},
                                              {"micro_batch", job.micro_batch, max_batch},
                                              {"inference_micro_batch", job.inference_micro_batch, max_batch},
                                              {"prompt_len", job.prompt_len, max_tokens},
                                              {"gen_len", job.gen_len, max_tokens},
                                              {"iterations", job.iterations, max_iterations},
                                              {"ppo_epochs", job.ppo_epochs, max_ppo_epochs},
                                              {"max_events", job.max_events, max_trace_events},
                                              {"offload_chunk_bytes", job.offload_chunk_bytes, max_bytes},
                                              {"device_capacity", job.device_capacity_bytes, max_bytes}});
      !problem.empty()) {
    return problem;
  }
  const std::size_t mini = job.effective_mini_batch();
  if (job.batch % mini != 0) return fmt::format("mini_batch: {} does not divide batch {}", mini, job.batch);
  if (mini % job.micro_batch != 0) {
    return fmt::format("micro_batch: {} does not divide mini_batch {}", job.micro_batch, mini);
  }
  if (job.offload_chunk_bytes < 4096) {
    return fmt::format("offload_chunk_bytes: {} is below 4096", job.offload_chunk_bytes);
  }
  if (job.offload_reference && job.offload_params) {
    return std::string("offload_reference: the reference is already streamed per layer by offload_params; choose one");
  }
  if (job.lora_rank > 0) {
    for (const std::string& t : job.lora_targets) {
      if (t != "q" && t != "k" && t != "v" && t != "o" && t != "qkv" && t != "gate" && t != "up" && t != "down") {
        return fmt::format("lora_targets: \"{}\" is not a linear (q, k, v, o, qkv, gate, up, down)", t);
      }
    }
    if (job.lora_targets.empty()) return std::string("lora_targets: names no linear");
    if (job.lora_rank > 4096) return fmt::format("lora_rank: {} is above the bound of 4096", job.lora_rank);
    if (job.offload_reference || job.offload_params) {
      return std::string("lora_rank: with LoRA the reference is the actor's base; there is no reference to offload");
    }
  }
  if (job.optimizer_states_on_host && job.offload_optimizer) {
    return std::string("optimizer_states_on_host: the states already live on the host in chunks with offload_optimizer; choose one");
  }
  for (model_role role : {model_role::actor, model_role::critic, model_role::reference, model_role::reward}) {
    if (std::string problem = check_model(job, role); !problem.empty()) return problem;
  }
  return std::monostate{};
}

}  // namespace phasealloc
