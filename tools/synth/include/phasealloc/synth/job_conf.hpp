// Jobs as PHASEALLOC_CONF-grammar strings: "preset:ppo-1.3b,batch:16,gen_len:256,seed:7".
//
// The string starts from a preset (key `preset`, or a bare preset name as the first item:
// "ppo-7b" and "ppo-7b,batch:8" work too; default ppo-125m) and overrides fields:
//   batch, generation_batch, prompt_len, gen_len, iterations, ppo_epochs, mini_batch,
//   micro_batch, inference_micro_batch, seed, max_events, lora_rank (non-negative integers)
//   gradient_checkpointing, flash_attention, master_weights, offload_optimizer,
//   offload_params, empty_cache_at_phases, response_logprobs,
//   joint_backward, shared_optimizer, with_critic, keep_model_output, offload_reference,
//   optimizer_states_on_host, prefill_cache_copy, dropout          (true / false)
//   offload_chunk_bytes, device_capacity                           (byte sizes: 64MiB, 80GiB)
//   lora_targets                                                   (a list: [q,k,v,o,down])
//   <model>.<field> for model in actor, critic, reference, reward and field in layers, hidden,
//   heads, kv_heads, ffn_hidden, vocab, max_positions, bytes_per_param (integers) or family
//   (llama / opt / gpt2); `models.<field>` sets the field of all four.
// An unknown key, a bad value or an inconsistent job is an error that names the key.
#pragma once

#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/synth/rlhf_job.hpp"

namespace phasealloc {

result<rlhf_job, std::string> parse_job(std::string_view conf);

/// A string parse_job turns back into `job` (every field written out, starting from its preset
/// name when it has one). Recorded in each trace's metadata as "synth.job".
std::string to_conf(const rlhf_job& job);

}  // namespace phasealloc
