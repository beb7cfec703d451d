// training: PPO updates of actor and critic (DeepSpeed-Chat's train_rlhf, OpenRLHF's
// training_step), one training phase per mini-batch followed by its optimizer phase.
//
// A micro-step gathers its slice of the shuffled experience (fancy indexing copies), runs the
// actor forward with autograd (optionally checkpointed), log_softmax over fp32 logits, the
// clipped policy loss, backward; then the critic forward, the clipped value loss, backward.
// Python keeps `logits` / `values` / `loss` alive until the step returns, so they outlive the
// backward. Gradients accumulate over the mini-batch's micro-steps.
#include <utility>
#include <vector>

#include "model_forward.hpp"
#include "ops.hpp"
#include "phasealloc/synth/synthesize.hpp"
#include "synth_context.hpp"

namespace phasealloc::detail::synth {
namespace {

struct micro_batch {
  std::size_t sequences = 0;
  std::size_t len = 0;       ///< prompt + response
  std::size_t response = 0;
  tensor ids, mask, old_logprobs, advantages, returns, old_values, action_mask;
};

micro_batch gather(graph& g, const iteration_shape& shape, std::size_t sequences) {
  micro_batch mb;
  mb.sequences = sequences;
  mb.len = shape.sequence_len();
  mb.response = shape.response_len;
  const std::size_t r = sequences * mb.response;
  mb.ids = g.make(sequences * mb.len, 8, alloc_tag::output);
  mb.mask = g.make(sequences * mb.len, 8, alloc_tag::output);
  mb.old_logprobs = g.make(r, 4, alloc_tag::output);
  mb.advantages = g.make(r, 4, alloc_tag::output);
  mb.returns = g.make(r, 4, alloc_tag::output);
  mb.old_values = g.make(r, 4, alloc_tag::output);
  mb.action_mask = g.make(r, 8, alloc_tag::output);
  return mb;
}

void release(graph& g, micro_batch& mb) {
  for (tensor* t : {&mb.ids, &mb.mask, &mb.old_logprobs, &mb.advantages, &mb.returns, &mb.old_values,
                    &mb.action_mask}) {
    g.drop(*t);
  }
}

forward_request training_request(const rlhf_job& job, const micro_batch& mb, head_output head) {
  forward_request r;
  r.dropout = job.dropout;
  r.batch = mb.sequences;
  r.q_len = mb.len;
  r.kv_len = mb.len;
  r.checkpoint = job.gradient_checkpointing;
  r.flash = job.flash_attention;
  r.head = head;
  return r;
}

// DeepSpeed-Chat's actor_loss_fn on gather_log_probs(logits[:, :-1], seq[:, 1:]); with
// response_logprobs, TRL's log_softmax of the response positions' logits only.
struct actor_loss {
  tensor logits, logprobs, loss;
};

actor_loss actor_forward(graph& g, synth_context& ctx, const micro_batch& mb) {
  const model_state& actor = ctx.model(model_role::actor);
  const std::size_t u = mb.sequences;
  const std::size_t positions = ctx.job.response_logprobs ? mb.response : mb.len - 1;
  const std::size_t vocab_n = u * positions * actor.desc.vocab;
  const std::size_t r = u * mb.response;
  tensor logits = model_forward(g, actor, training_request(ctx.job, mb, head_output::all_logits));
  op_desc upcast_op;  // logits[:, first:-1].float()
  upcast_op.inputs = {logits};
  upcast_op.out_numel = vocab_n;
  upcast_op.out_elem_bytes = 4;
  upcast_op.out_tag = alloc_tag::logits;
  upcast_op.grad_tag = alloc_tag::logits;
  // A slice of the logits: its backward casts the grad back (slice-sized), then SliceBackward
  // scatters that into zeros of the whole logits' size.
  if (positions != mb.len - 1) upcast_op.backward_temps_bytes = {vocab_n * logits.elem_bytes};
  tensor upcast = g.run(upcast_op);
  tensor lsm = pointwise(g, {upcast}, {}, vocab_n, 4, /*save_output=*/true, alloc_tag::logits);
  g.drop(upcast);
  op_desc gather_op;  // gather's backward scatters into a zero tensor of the input's size
  gather_op.inputs = {lsm};
  gather_op.out_numel = u * positions;
  gather_op.out_elem_bytes = 4;
  gather_op.grad_tag = alloc_tag::logits;
  tensor logprobs = g.run(gather_op);
  g.drop(lsm);

  tensor log_ratio = pointwise(g, {logprobs}, {mb.action_mask}, r, 4);   // (logprobs - old) * mask
  tensor ratio = pointwise(g, {log_ratio}, {}, r, 4, /*save_output=*/true);  // exp
  g.drop(log_ratio);
  tensor loss1 = pointwise(g, {ratio}, {mb.advantages}, r, 4);            // -advantages * ratio
  tensor clipped = pointwise(g, {ratio}, {ratio}, r, 4);                  // clamp(ratio, 1 - eps, 1 + eps)
  tensor loss2 = pointwise(g, {clipped}, {mb.advantages}, r, 4);
  g.drop(clipped);
  tensor worst = pointwise(g, {loss1, loss2}, {loss1, loss2}, r, 4);      // torch.max
  g.drop(loss1);
  g.drop(loss2);
  g.drop(ratio);
  tensor masked = pointwise(g, {worst}, {mb.action_mask}, r, 4);
  g.drop(worst);
  tensor loss = pointwise(g, {masked}, {}, 1, 4);                         // sum / mask.sum()
  g.drop(masked);
  return {logits, logprobs, loss};
}

// loss.backward(), then Python lets go of the step's tensors.
void actor_backward(graph& g, actor_loss& a) {
  g.backward(a.loss);
  g.drop(a.loss);
  g.drop(a.logprobs);
  g.drop(a.logits);
}

// DeepSpeed-Chat's critic_loss_fn on forward_value(...)[:, :-1].
void critic_step(synth_context& ctx, const micro_batch& mb) {
  model_state& critic = ctx.model(model_role::critic);
  graph g(ctx.builder, ctx.cost, /*grad_enabled=*/true, critic.grad_slots());
  const std::size_t r = mb.sequences * mb.response;
  tensor values = model_forward(g, critic, training_request(ctx.job, mb, head_output::values));
  tensor clipped = pointwise(g, {values}, {values, mb.old_values}, r, 4);     // clamp(values, old +- eps)
  tensor diff1 = pointwise(g, {values}, {}, r, 4);                            // values.float() - returns
  tensor loss1 = pointwise(g, {diff1}, {diff1}, r, 4);                        // ** 2
  g.drop(diff1);
  tensor diff2 = pointwise(g, {clipped}, {}, r, 4);
  g.drop(clipped);
  tensor loss2 = pointwise(g, {diff2}, {diff2}, r, 4);
  g.drop(diff2);
  tensor worst = pointwise(g, {loss1, loss2}, {loss1, loss2}, r, 4);
  g.drop(loss1);
  g.drop(loss2);
  tensor masked = pointwise(g, {worst}, {mb.action_mask}, r, 4);
  g.drop(worst);
  tensor loss = pointwise(g, {masked}, {}, 1, 4);                             // 0.5 * sum / mask.sum()
  g.drop(masked);
  g.backward(loss);
  g.drop(loss);
  g.drop(values);
}

}  // namespace

void run_training(synth_context& ctx, const iteration_shape& shape) {
  const rlhf_job& job = ctx.job;
  const std::size_t mini = job.effective_mini_batch();
  for (std::size_t epoch = 0; epoch < job.ppo_epochs; ++epoch) {
    for (std::size_t first = 0; first < job.batch; first += mini) {
      enter_phase(ctx, rlhf_phase::training);
      for (std::size_t micro = 0; micro < mini; micro += job.micro_batch) {
        graph g(ctx.builder, ctx.cost, /*grad_enabled=*/false);
        micro_batch mb = gather(g, shape, job.micro_batch);
        graph actor_graph(ctx.builder, ctx.cost, /*grad_enabled=*/true, ctx.model(model_role::actor).grad_slots());
        actor_loss a = actor_forward(actor_graph, ctx, mb);
        if (!job.with_critic) {
          actor_backward(actor_graph, a);
        } else if (job.joint_backward) {
          critic_step(ctx, mb);  // the critic's forward, then its half of the one backward
          actor_backward(actor_graph, a);
        } else {
          actor_backward(actor_graph, a);
          critic_step(ctx, mb);
        }
        release(g, mb);
      }
      std::vector<model_state*> trained{&ctx.model(model_role::actor)};
      if (job.with_critic) trained.push_back(&ctx.model(model_role::critic));
      if (job.optimizer_states_on_host) {  // user code before optimizer.step(), where the phase begins
        for (model_state* m : trained) states_to_device(ctx.builder, ctx.cost, *m);
      }
      enter_phase(ctx, rlhf_phase::optimizer);
      if (job.shared_optimizer && !job.offload_optimizer) {
        run_shared_optimizer_step(ctx, trained);
      } else {
        for (model_state* m : trained) run_optimizer_step(ctx, *m);
      }
      if (job.optimizer_states_on_host) {
        for (model_state* m : trained) states_to_host(ctx.builder, ctx.cost, *m);
      }
    }
  }
}

}  // namespace phasealloc::detail::synth
