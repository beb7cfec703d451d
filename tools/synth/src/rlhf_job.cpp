#include "phasealloc/synth/rlhf_job.hpp"

#include <fmt/format.h>

namespace phasealloc {
namespace {

std::string check_model(const rlhf_job& job, model_role role) {
  const model_desc& d = model_of(job, role);
  const std::string_view who = to_string(role);
  struct positive { std::string_view key; std::size_t value; };
  for (const positive& p : {positive{"layers", d.layers}, positive{"hidden", d.hidden}, positive{"heads", d.heads},
                            positive{"kv_heads", d.kv_heads}, positive{"ffn_hidden", d.ffn_hidden},
                            positive{"vocab", d.vocab}}) {
    if (p.value == 0) return fmt::format("{}.{}: must be at least 1", who, p.key);
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
  if (d.family == model_family::opt) {
    if (d.kv_heads != d.heads) return fmt::format("{}.kv_heads: opt models have kv_heads == heads", who);
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
  const std::size_t mini = job.effective_mini_batch();
  if (job.batch % mini != 0) return fmt::format("mini_batch: {} does not divide batch {}", mini, job.batch);
  if (mini % job.micro_batch != 0) {
    return fmt::format("micro_batch: {} does not divide mini_batch {}", job.micro_batch, mini);
  }
  if (job.offload_chunk_bytes < 4096) {
    return fmt::format("offload_chunk_bytes: {} is below 4096", job.offload_chunk_bytes);
  }
  for (model_role role : {model_role::actor, model_role::critic, model_role::reference, model_role::reward}) {
    if (std::string problem = check_model(job, role); !problem.empty()) return problem;
  }
  return std::monostate{};
}

}  // namespace phasealloc
