// optimizer: clip_grad_norm_(max_norm=1.0), torch.optim.AdamW.step() (foreach implementation, two
// parameter groups) and zero_grad(set_to_none=True); or, with offload_optimizer, a chunked step
// whose states stream through GPU buffers; or, with shared_optimizer, one AdamW over the actor's
// and the critic's parameters in one group, unclipped.
//
// Clipping (foreach): one 0-dim norm per grad, torch.stack, vector_norm, the clip coefficient;
// the grads are scaled in place. (DeepSpeed clips inside engine.step(), hence this phase.)
// Resident: the first step creates exp_avg and exp_avg_sq per parameter (zeros_like, lazily, in
// _init_group, group by group), in the master dtype (fp32) when the job keeps fp32 masters, else
// in the param dtype. Each step allocates the fp32 copies of the grads (with masters) and the
// list _foreach_sqrt(exp_avg_sq) returns, frees them at the end of the group. zero_grad then
// frees every .grad.
// Offloaded (ZeRO-Offload / ProTrain non-persistent chunks): masters and states live on the CPU
// in `offload_chunk_bytes` fp32 chunks. Per chunk: master, exp_avg, exp_avg_sq staged in on the
// copy stream (the next chunk prefetched), the chunk's grads flattened to fp32, the update, the
// chunk written back and freed; the bf16 params are updated in place from the master chunk.
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "synth_context.hpp"

namespace phasealloc::detail::synth {
namespace {

void clip_grad_norm(synth_context& ctx, model_state& m) {
  trace_builder& b = ctx.builder;
  const std::size_t elem = m.desc.bytes_per_param;
  std::vector<alloc_id> norms;  // torch._foreach_norm(grads)
  double bytes = 0;
  for (std::size_t i = 0; i < m.grads.size(); ++i) {
    if (m.grads[i] == 0) continue;
    norms.push_back(b.alloc(elem, alloc_tag::activation));
    bytes += static_cast<double>(m.param_bytes[i]);
  }
  b.advance_ns(ctx.cost.op_ns(0, bytes));
  const alloc_id stacked = b.alloc(norms.size() * elem, alloc_tag::activation);
  const alloc_id total = b.alloc(elem, alloc_tag::activation);  // vector_norm(stack(norms))
  b.release(stacked);
  for (alloc_id id : norms) b.release(id);
  const alloc_id shifted = b.alloc(elem, alloc_tag::activation);  // total_norm + 1e-6
  const alloc_id coef = b.alloc(elem, alloc_tag::activation);     // max_norm / (...)
  b.release(shifted);
  const alloc_id clamped = b.alloc(elem, alloc_tag::activation);  // clamp(coef, max=1.0)
  b.advance_ns(ctx.cost.op_ns(0, 2 * bytes));                     // _foreach_mul_(grads, clamped)
  b.release(coef);
  b.release(clamped);
  b.release(total);
}

// One parameter group of a foreach AdamW step: (model, parameter index) pairs.
using param_group = std::vector<std::pair<model_state*, std::size_t>>;

void foreach_adamw_group(synth_context& ctx, const param_group& group) {
  trace_builder& b = ctx.builder;
  double bytes = 0;
  for (const auto& [m, i] : group) {  // _init_group
    if (m->exp_avg[i] == 0) {
      m->exp_avg[i] = b.alloc(m->state_bytes(i), alloc_tag::optimizer_state);
      m->exp_avg_sq[i] = b.alloc(m->state_bytes(i), alloc_tag::optimizer_state);
    }
    bytes += static_cast<double>(6 * m->state_bytes(i) + 3 * m->param_bytes[i]);
  }
  std::vector<alloc_id> grads32;
  for (const auto& [m, i] : group) {  // master.grad = param.grad.float()
    if (m->master) grads32.push_back(b.alloc(m->layout.params[i].numel * 4, alloc_tag::gradient));
  }
  std::vector<alloc_id> sqrt_list;  // torch._foreach_sqrt(exp_avg_sqs)
  for (const auto& [m, i] : group) {
    sqrt_list.push_back(b.alloc(m->state_bytes(i), alloc_tag::activation));
  }
  b.advance_ns(ctx.cost.op_ns(0, bytes));
  for (alloc_id id : sqrt_list) b.release(id);
  for (alloc_id id : grads32) b.release(id);  // after master -> param copies
}

void foreach_adamw(synth_context& ctx, model_state& m) {
  for (bool decay : {true, false}) {
    param_group group;
    for (std::size_t i = 0; i < m.layout.params.size(); ++i) {
      if (m.layout.params[i].decay == decay && m.grads[i] != 0) group.emplace_back(&m, i);
    }
    foreach_adamw_group(ctx, group);
  }
}

void zero_grad(synth_context& ctx, model_state& m) {  // zero_grad(set_to_none=True)
  for (alloc_id& grad : m.grads) {
    ctx.builder.release(grad);
    grad = 0;
  }
}

void chunked_adamw(synth_context& ctx, model_state& m) {
  trace_builder& b = ctx.builder;
  const std::size_t chunk_bytes = std::max<std::size_t>(ctx.job.offload_chunk_bytes, 4);
  const std::size_t chunk_numel = chunk_bytes / 4;
  const std::size_t total = m.layout.total_numel();
  const std::size_t chunks = (total + chunk_numel - 1) / chunk_numel;
  std::vector<std::array<alloc_id, 3>> staged(chunks + 1, {0, 0, 0});
  auto stage_in = [&](std::size_t c) {
    if (c >= chunks) return;
    for (alloc_id& id : staged[c]) id = b.alloc(chunk_bytes, alloc_tag::offload_chunk, copy_stream);
    b.advance_ns(ctx.cost.copy_ns(3.0 * static_cast<double>(chunk_bytes)));
  };
  stage_in(0);
  for (std::size_t c = 0; c < chunks; ++c) {
    stage_in(c + 1);
    for (alloc_id id : staged[c]) b.record_stream(id, compute_stream);
    const alloc_id grads32 = b.alloc(chunk_bytes, alloc_tag::offload_chunk);
    b.advance_ns(ctx.cost.op_ns(0, 8.0 * static_cast<double>(chunk_bytes)));
    b.release(grads32);
    b.advance_ns(ctx.cost.copy_ns(3.0 * static_cast<double>(chunk_bytes)));  // write back
    for (alloc_id id : staged[c]) b.release(id);
  }
}

}  // namespace

void run_optimizer_step(synth_context& ctx, model_state& m) {
  clip_grad_norm(ctx, m);
  if (ctx.job.offload_optimizer) {
    chunked_adamw(ctx, m);
  } else {
    foreach_adamw(ctx, m);
  }
  zero_grad(ctx, m);
}

void run_shared_optimizer_step(synth_context& ctx, const std::vector<model_state*>& models) {
  param_group group;
  for (model_state* m : models) {
    for (std::size_t i = 0; i < m->layout.params.size(); ++i) {
      if (m->grads[i] != 0) group.emplace_back(m, i);
    }
  }
  foreach_adamw_group(ctx, group);
  for (model_state* m : models) zero_grad(ctx, *m);
}

}  // namespace phasealloc::detail::synth
