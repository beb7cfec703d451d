// The shapes of each iteration's rollout, drawn from the job's seed before anything is emitted.
//
// Design note
// Rationale: in a real PPO job no two iterations have the same tensor sizes. Prompts are padded
//   to the longest prompt of the batch (DataCollatorWithPadding), and generate() runs until every
//   sequence of the call has produced EOS or max_new_tokens, so the number of decode steps is the
//   longest response of the call. Those two numbers set every activation, KV and logits size.
// Approach: prompt lengths uniform in [prompt_len / 4, prompt_len]; response lengths
//   gen_len * 0.6 * (u1 + u2) (a triangular law with mean 0.6 gen_len; about 6% of responses run
//   into max_new_tokens), at least 1, at most gen_len. Sequences are padded to the longest
//   response of the rollout after generation (torch.cat of the calls' outputs).
// Limitations: no correlation between prompt and response length, no length drift over training.
#pragma once

#include <cstddef>
#include <vector>

#include "phasealloc/synth/rlhf_job.hpp"

namespace phasealloc::detail::synth {

struct generate_call {
  std::size_t sequences = 0;
  std::size_t new_tokens = 0;  ///< Forward passes generate() runs: 1 prefill + new_tokens - 1 decodes.
};

struct iteration_shape {
  std::size_t prompt_len = 0;    ///< Padded prompt length of this rollout.
  std::size_t response_len = 0;  ///< Longest response: the padded response width.
  std::vector<generate_call> calls;

  std::size_t sequence_len() const noexcept { return prompt_len + response_len; }
};

std::vector<iteration_shape> plan_rollouts(const rlhf_job& job);

}  // namespace phasealloc::detail::synth
