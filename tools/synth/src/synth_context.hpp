// What the phase emitters share: the builder, the time model, the job, the models and the
// rollout data that lives from one phase to the next.
#pragma once

#include <string_view>

#include "autograd.hpp"
#include "cost_model.hpp"
#include "model_state.hpp"
#include "rollout_plan.hpp"
#include "trace_builder.hpp"

namespace phasealloc::detail::synth {

/// The experience of one iteration (tag output). A new iteration's tensor replaces the old one
/// where the Python reassigns the variable, so the old one is freed only then.
struct rollout_data {
  tensor queries;         ///< (batch, prompt) int64
  tensor query_mask;
  tensor sequences;       ///< (batch, prompt + response) int64
  tensor attention_mask;
  tensor action_mask;     ///< (batch, response)
  tensor logprobs;        ///< (batch, len - 1) fp32, the actor's at rollout time
  tensor ref_logprobs;
  tensor values;          ///< (batch, len) fp32
  tensor scores;          ///< (batch) fp32
  tensor rewards;         ///< (batch, len - 1) fp32
  tensor advantages;      ///< (batch, response) fp32
  tensor returns;
};

struct synth_context {
  trace_builder& builder;
  const cost_model& cost;
  const rlhf_job& job;
  model_set& models;
  rollout_data rollout;

  model_state& model(model_role role) noexcept { return model_for(models, role); }
};

/// A phase event, preceded by torch.cuda.empty_cache() when the job calls it at phase changes.
void enter_phase(synth_context& ctx, std::string_view name);

/// `slot = fresh`, freeing the old tensor afterwards (Python's reassignment order).
void replace(graph& g, tensor& slot, tensor fresh);

void run_generation(synth_context& ctx, const iteration_shape& shape);
void run_inference(synth_context& ctx, const iteration_shape& shape);
/// Every mini-batch: a training phase of micro-steps, then an optimizer phase.
void run_training(synth_context& ctx, const iteration_shape& shape);
/// optimizer.step() then optimizer.zero_grad(set_to_none=True) for one trained model.
void run_optimizer_step(synth_context& ctx, model_state& m);
/// One AdamW step over several models' parameters in one group (rlhf_job::shared_optimizer).
void run_shared_optimizer_step(synth_context& ctx, const std::vector<model_state*>& models);

}  // namespace phasealloc::detail::synth
