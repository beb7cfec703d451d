#include "model_state.hpp"

namespace phasealloc::detail::synth {
namespace {

model_state make_model(const rlhf_job& job, model_role role) {
  model_state m;
  m.role = role;
  m.desc = model_of(job, role);
  lora_spec lora;
  if (job.lora_rank > 0 && (role == model_role::actor || role == model_role::critic)) {
    lora.rank = job.lora_rank;
    lora.targets = job.lora_targets;
  }
  m.layout = make_layout(m.desc, role, lora);
  m.shares_actor_base = job.lora_rank > 0 && role == model_role::reference;
  m.present = role != model_role::critic || job.with_critic;
  m.trained = m.present && (role == model_role::actor || role == model_role::critic);
  m.offloaded = job.offload_params && (role == model_role::reference || role == model_role::reward);
  m.host_resident = job.offload_reference && role == model_role::reference;
  m.master = m.trained && job.master_weights && !job.offload_optimizer && m.desc.bytes_per_param < 4;
  m.state_elem_bytes = m.master || job.offload_optimizer ? 4 : m.desc.bytes_per_param;
  const std::size_t n = m.layout.params.size();
  m.param_bytes.resize(n);
  m.trainable_params.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t elem = m.layout.params[i].elem_bytes != 0 ? m.layout.params[i].elem_bytes : m.desc.bytes_per_param;
    m.param_bytes[i] = m.layout.params[i].numel * elem;
    m.trainable_params[i] = m.layout.params[i].trainable;
  }
  m.params.assign(n, 0);
  if (m.trained) {
    m.grads.assign(n, 0);
    m.exp_avg.assign(n, 0);
    m.exp_avg_sq.assign(n, 0);
    m.masters.assign(n, 0);
  }
  return m;
}

}  // namespace

model_set make_models(const rlhf_job& job) {
  return {make_model(job, model_role::actor), make_model(job, model_role::critic),
          make_model(job, model_role::reference), make_model(job, model_role::reward)};
}

void params_to_device(trace_builder& builder, const cost_model& cost, model_state& m, bool adapters) {
  const bool buffer_after_norm = m.layout.buffer_bytes > 0;
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    if (m.layout.params[i].adapter != adapters) continue;
    m.params[i] = builder.alloc(m.param_bytes[i], alloc_tag::parameter);
    builder.advance_ns(cost.copy_ns(static_cast<double>(m.param_bytes[i])));
    if (buffer_after_norm && i == m.layout.final_norm.weight) {
      m.buffers = builder.alloc(m.layout.buffer_bytes, alloc_tag::parameter);
    }
  }
}

void params_to_host(trace_builder& builder, const cost_model& cost, model_state& m) {
  const bool buffer_after_norm = m.layout.buffer_bytes > 0;
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    if (m.params[i] == 0) continue;
    builder.advance_ns(cost.copy_ns(static_cast<double>(m.param_bytes[i])));
    builder.release(m.params[i]);
    m.params[i] = 0;
    if (buffer_after_norm && i == m.layout.final_norm.weight) {
      builder.release(m.buffers);
      m.buffers = 0;
    }
  }
}

void states_to_device(trace_builder& builder, const cost_model& cost, model_state& m) {
  if (!m.states_on_host) return;
  for (std::size_t i = 0; i < m.exp_avg.size(); ++i) {
    if (m.grads[i] == 0) continue;  // a parameter that never stepped has no state
    const std::size_t bytes = m.state_bytes(i);
    m.exp_avg[i] = builder.alloc(bytes, alloc_tag::optimizer_state);
    m.exp_avg_sq[i] = builder.alloc(bytes, alloc_tag::optimizer_state);
    builder.advance_ns(cost.copy_ns(2.0 * static_cast<double>(bytes)));
  }
  m.states_on_host = false;
}

void states_to_host(trace_builder& builder, const cost_model& cost, model_state& m) {
  for (std::size_t i = 0; i < m.exp_avg.size(); ++i) {
    if (m.exp_avg[i] == 0) continue;
    const std::size_t bytes = m.state_bytes(i);
    builder.advance_ns(cost.copy_ns(2.0 * static_cast<double>(bytes)));
    builder.release(m.exp_avg[i]);
    builder.release(m.exp_avg_sq[i]);
    m.exp_avg[i] = 0;
    m.exp_avg_sq[i] = 0;
  }
  m.states_on_host = true;
}

void load_models(trace_builder& builder, const cost_model& cost, model_set& models) {
  for (model_role role : {model_role::actor, model_role::reference, model_role::critic, model_role::reward}) {
    model_state& m = model_for(models, role);
    // offloaded: streamed per forward; shares_actor_base: the actor's base is the reference
    if (!m.present || m.offloaded || m.shares_actor_base) continue;
    params_to_device(builder, cost, m, /*adapters=*/false);
  }
  // get_peft_model(actor), then get_peft_model(critic.body): the adapters, next to their base.
  for (model_role role : {model_role::actor, model_role::critic}) {
    model_state& m = model_for(models, role);
    if (m.present) params_to_device(builder, cost, m, /*adapters=*/true);
  }
  // A host-resident model is built where the others are, then moved out: model.to("cpu").
  for (model_state& m : models) {
    if (m.present && m.host_resident) params_to_host(builder, cost, m);
  }
  for (model_role role : {model_role::actor, model_role::critic}) {
    model_state& m = model_for(models, role);
    if (!m.master) continue;
    for (std::size_t i = 0; i < m.params.size(); ++i) {
      if (!m.trainable_params[i]) continue;
      m.masters[i] = builder.alloc(m.layout.params[i].numel * 4, alloc_tag::optimizer_state);
      builder.advance_ns(cost.op_ns(0, static_cast<double>(m.param_bytes[i] + m.layout.params[i].numel * 4)));
    }
  }
}

}  // namespace phasealloc::detail::synth
