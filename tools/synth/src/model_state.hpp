// One of the job's four models at run time: its layout and the allocations that hold its
// parameters, gradients and optimizer state.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "autograd.hpp"
#include "param_layout.hpp"
#include "phasealloc/synth/rlhf_job.hpp"
#include "trace_builder.hpp"

namespace phasealloc::detail::synth {

struct model_state {
  model_role role = model_role::actor;
  model_desc desc;
  param_layout layout;
  bool trained = false;     ///< actor and critic.
  bool present = true;      ///< false: the job has no such model (a critic with with_critic:false).
  bool offloaded = false;   ///< Weights live on the CPU and are streamed per layer (offload_params).
  bool host_resident = false;  ///< Weights live on the CPU and move in whole per use (offload_reference).
  bool states_on_host = false; ///< AdamW's states were moved to the CPU (optimizer_states_on_host).
  bool shares_actor_base = false;  ///< LoRA: the reference is the actor's base (never loaded).
  bool master = false;      ///< fp32 master weights on the GPU.
  std::size_t state_elem_bytes = 4;  ///< AdamW state dtype: fp32 with masters, else the param dtype.

  std::vector<std::size_t> param_bytes;  ///< By param index (also the grad size).
  std::vector<bool> trainable_params;    ///< By param index: false for a frozen (LoRA base) weight.
  std::vector<alloc_id> params;          ///< 0 while offloaded.
  std::vector<alloc_id> grads;           ///< .grad; 0 = None.
  std::vector<alloc_id> exp_avg;
  std::vector<alloc_id> exp_avg_sq;
  std::vector<alloc_id> masters;
  alloc_id buffers = 0;

  /// Bytes of one AdamW state tensor of parameter i: fp32 with masters (or chunked offload), else
  /// the parameter's own dtype (zeros_like).
  std::size_t state_bytes(std::size_t i) const noexcept {
    return state_elem_bytes == 4 ? layout.params[i].numel * 4 : param_bytes[i];
  }
  param_grads grad_slots() noexcept {
    return trained ? param_grads{&grads, &param_bytes, &trainable_params} : param_grads{};
  }
};

using model_set = std::array<model_state, 4>;  ///< Indexed by model_role.

inline model_state& model_for(model_set& models, model_role role) noexcept {
  return models[static_cast<std::size_t>(role)];
}

model_set make_models(const rlhf_job& job);

/// Setup, before the first iteration: from_pretrained(...).to("cuda") of the resident models,
/// tensor by tensor (actor, reference, critic, reward, as TRL / DeepSpeed-Chat construct them),
/// then the optimizers' fp32 master copies of the trained ones. A host-resident model
/// (offload_reference) is loaded with the others and then moved to the host.
void load_models(trace_builder& builder, const cost_model& cost, model_set& models);

/// model.to("cuda") of a host-resident model: one allocation per parameter, in layout order;
/// the base parameters, or (`adapters`) the LoRA matrices.
void params_to_device(trace_builder& builder, const cost_model& cost, model_state& m, bool adapters = false);
/// model.to("cpu"): every parameter's GPU copy freed, in layout order.
void params_to_host(trace_builder& builder, const cost_model& cost, model_state& m);
/// Every AdamW state tensor .to("cuda") (exp_avg, then exp_avg_sq, parameter by parameter) when
/// they are on the host; nothing before the first step created them.
void states_to_device(trace_builder& builder, const cost_model& cost, model_state& m);
/// Every AdamW state tensor .to("cpu"), in the same order.
void states_to_host(trace_builder& builder, const cost_model& cost, model_state& m);

}  // namespace phasealloc::detail::synth
