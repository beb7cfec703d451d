// inference: scoring the rollout under no_grad (DeepSpeed-Chat's generate_experience, TRL's
// rollout loop), `inference_micro_batch` sequences at a time.
//
// Per micro-batch: the actor and the reference give log-probs (vocab logits upcast to fp32,
// log_softmax, gather: the phase's big transient), the critic values and the reward model a
// score at the last token. The LM forwards are called as the trainers call them, without
// use_cache=False, so HF builds a DynamicCache of every layer's K and V and returns it with the
// logits: both die together when the output object does, after the log-probs are taken. The per-micro-batch outputs are concatenated, then the KL-shaped
// rewards and GAE advantages / returns are computed the way the PPO trainers do it: a Python
// loop over response positions that creates a handful of (batch,) tensors per position, a stack,
// and a whitening of the advantages.
#include <algorithm>
#include <utility>
#include <vector>

#include "model_forward.hpp"
#include "ops.hpp"
#include "phasealloc/synth/synthesize.hpp"
#include "synth_context.hpp"

namespace phasealloc::detail::synth {
namespace {

struct score_parts {
  std::vector<tensor> logprobs, ref_logprobs, values, scores;
};

// log_softmax(logits[:, first:-1].float()).gather(...): (micro, positions) fp32, where positions is
// len - 1 (every position's) or the response length (response_logprobs).
tensor log_probs(graph& g, const tensor& logits, std::size_t micro, std::size_t positions, std::size_t vocab) {
  const std::size_t n = micro * positions * vocab;
  tensor upcast = pointwise(g, {logits}, {}, n, 4, false, alloc_tag::logits);  // logits[:, :-1].float()
  tensor lsm = pointwise(g, {upcast}, {}, n, 4, false, alloc_tag::logits);
  g.drop(upcast);
  tensor picked = pointwise(g, {lsm}, {}, micro * positions, 4, false, alloc_tag::output);
  g.drop(lsm);
  return picked;
}

void score_micro_batch(synth_context& ctx, std::size_t micro, std::size_t len, std::size_t response,
                       score_parts& parts) {
  const std::size_t positions = ctx.job.response_logprobs ? response : len - 1;
  for (model_role role : {model_role::actor, model_role::reference, model_role::critic, model_role::reward}) {
    model_state& m = ctx.model(role);
    if (!m.present) continue;
    if (m.host_resident) params_to_device(ctx.builder, ctx.cost, m);  // reference.to("cuda")
    graph g(ctx.builder, ctx.cost, /*grad_enabled=*/false);
    forward_request r;
    r.batch = micro;
    r.q_len = len;
    r.kv_len = len;
    r.flash = ctx.job.flash_attention;
    r.head = m.layout.lm_head ? head_output::all_logits : head_output::values;
    std::vector<kv_slot> cache(m.layout.lm_head ? m.desc.layers : 0);  // value heads pass use_cache=False
    if (m.layout.lm_head) r.cache = &cache;
    r.cache_copies_prefill = ctx.job.prefill_cache_copy;
    r.dropout = ctx.job.dropout && m.trained;  // reference and reward are eval()
    tensor out = model_forward(g, m, r);
    if (m.layout.lm_head) {
      if (!ctx.job.keep_model_output) {  // the output object dies at once: its past_key_values go
        for (kv_slot& slot : cache) {
          g.drop(slot.k);
          g.drop(slot.v);
        }
      }
      if (m.host_resident) params_to_host(ctx.builder, ctx.cost, m);  // reference.to("cpu"); the logits live on
      tensor lp = log_probs(g, out, micro, positions, m.desc.vocab);
      (role == model_role::actor ? parts.logprobs : parts.ref_logprobs).push_back(lp);
      g.drop(out);  // the output object dies: logits, then past_key_values
      for (kv_slot& slot : cache) {
        g.drop(slot.k);
        g.drop(slot.v);
      }
      continue;
    }
    tensor values = cast(g, out, 4, alloc_tag::output);  // .float()
    g.drop(out);
    if (role == model_role::critic) {
      parts.values.push_back(values);
    } else {
      parts.scores.push_back(pointwise(g, {values}, {}, micro, 4, false, alloc_tag::output));  // end scores
      g.drop(values);
    }
  }
}

// torch.cat(parts): the whole batch's tensor, then the parts die.
tensor concatenate(graph& g, std::vector<tensor>& parts) {
  std::size_t numel = 0;
  for (const tensor& t : parts) numel += t.numel;
  tensor all = g.make(numel, 4, alloc_tag::output);
  for (tensor& t : parts) g.drop(t);
  return all;
}

// KL-penalised rewards, GAE advantages and returns, whitened advantages.
void advantages(synth_context& ctx, graph& g, const iteration_shape& shape) {
  rollout_data& data = ctx.rollout;
  const std::size_t batch = ctx.job.batch;
  const std::size_t steps = shape.sequence_len() - 1;
  tensor kl = pointwise(g, {data.logprobs, data.ref_logprobs}, {}, batch * steps, 4);
  replace(g, data.rewards, pointwise(g, {kl}, {}, batch * steps, 4, false, alloc_tag::output));  // -beta * kl
  g.drop(kl);
  std::vector<tensor> reversed;
  tensor last;  // lastgaelam, a Python 0 at first
  for (std::size_t t = 0; t < shape.response_len; ++t) {
    tensor discounted = pointwise(g, {}, {}, batch, 4);              // gamma * nextvalues
    tensor target = pointwise(g, {discounted}, {}, batch, 4);        // rewards[:, t] + ...
    g.drop(discounted);
    tensor delta = pointwise(g, {target}, {}, batch, 4);             // ... - values[:, t]
    g.drop(target);
    tensor carried = last.id != 0 ? pointwise(g, {last}, {}, batch, 4) : tensor{};  // gamma * lam * lastgaelam
    tensor gae = pointwise(g, {delta, carried}, {}, batch, 4);
    g.drop(delta);
    g.drop(carried);
    g.drop(last);
    last = g.share(gae);
    reversed.push_back(gae);
  }
  g.drop(last);
  tensor stacked = g.make(batch * shape.response_len, 4, alloc_tag::output);  // torch.stack(reversed[::-1], 1)
  for (tensor& t : reversed) g.drop(t);
  replace(g, data.returns, pointwise(g, {stacked, data.values}, {}, stacked.numel, 4, false, alloc_tag::output));
  tensor centered = pointwise(g, {stacked}, {}, stacked.numel, 4);  // masked_whiten
  tensor whitened = pointwise(g, {centered}, {}, stacked.numel, 4, false, alloc_tag::output);
  g.drop(centered);
  g.drop(stacked);
  replace(g, data.advantages, std::move(whitened));
}

}  // namespace

void run_inference(synth_context& ctx, const iteration_shape& shape) {
  enter_phase(ctx, rlhf_phase::inference);
  const std::size_t micro = ctx.job.effective_inference_micro_batch();
  score_parts parts;
  for (std::size_t first = 0; first < ctx.job.batch; first += micro) {
    score_micro_batch(ctx, std::min(micro, ctx.job.batch - first), shape.sequence_len(), shape.response_len, parts);
  }
  graph g(ctx.builder, ctx.cost, /*grad_enabled=*/false);
  rollout_data& data = ctx.rollout;
  replace(g, data.logprobs, concatenate(g, parts.logprobs));
  replace(g, data.ref_logprobs, concatenate(g, parts.ref_logprobs));
  if (!parts.values.empty()) replace(g, data.values, concatenate(g, parts.values));
  replace(g, data.scores, concatenate(g, parts.scores));
  advantages(ctx, g, shape);
}

}  // namespace phasealloc::detail::synth
