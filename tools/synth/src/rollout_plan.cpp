#include "rollout_plan.hpp"

#include <algorithm>
#include <cmath>

#include "seeded_rng.hpp"

namespace phasealloc::detail::synth {

std::vector<iteration_shape> plan_rollouts(const rlhf_job& job) {
  seeded_rng rng(job.seed);
  std::vector<iteration_shape> plan;
  plan.reserve(job.iterations);
  const std::size_t shortest_prompt = std::max<std::size_t>(1, job.prompt_len / 4);
  const std::size_t per_call = job.effective_generation_batch();
  for (std::size_t it = 0; it < job.iterations; ++it) {
    iteration_shape shape;
    for (std::size_t s = 0; s < job.batch; ++s) {
      shape.prompt_len = std::max(shape.prompt_len, rng.between(shortest_prompt, job.prompt_len));
    }
    for (std::size_t first = 0; first < job.batch; first += per_call) {
      generate_call call;
      call.sequences = std::min(per_call, job.batch - first);
      for (std::size_t s = 0; s < call.sequences; ++s) {
        const double natural = 0.6 * (rng.uniform() + rng.uniform()) * static_cast<double>(job.gen_len);
        const auto tokens = static_cast<std::size_t>(std::ceil(natural));
        call.new_tokens = std::max(call.new_tokens, std::clamp<std::size_t>(tokens, 1, job.gen_len));
      }
      shape.response_len = std::max(shape.response_len, call.new_tokens);
      shape.calls.push_back(call);
    }
    plan.push_back(std::move(shape));
  }
  return plan;
}

}  // namespace phasealloc::detail::synth
