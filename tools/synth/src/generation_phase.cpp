// generation: Hugging Face generate() with a DynamicCache, sampling at temperature 1.
//
// Per call: prefill over the padded prompts, then one forward per new token. The cache's K and V
// of every layer are regrown by torch.cat each step (allocate len + 1 tokens, free len), logits
// are taken for the last position only, upcast to fp32 and sampled (temperature, softmax,
// multinomial's exponential trick); input_ids and attention_mask grow by one column per step.
// When generate() returns, the cache dies layer by layer; the calls' sequences are padded to the
// longest and concatenated into the rollout. (The first matmul of the job, here, also allocates
// cuBLAS's workspace: see ops.cpp.)
#include <utility>
#include <vector>

#include "model_forward.hpp"
#include "ops.hpp"
#include "phasealloc/synth/synthesize.hpp"
#include "synth_context.hpp"

namespace phasealloc::detail::synth {
namespace {

// One sampling step after the forward: returns the chosen tokens, (batch) int64.
tensor sample(graph& g, tensor logits, std::size_t batch, std::size_t vocab) {
  const std::size_t n = batch * vocab;
  tensor next_logits = cast(g, logits, 4, alloc_tag::logits);  // [:, -1, :].to(copy=True, dtype=float32)
  g.drop(logits);
  tensor scores = pointwise(g, {next_logits}, {}, n, 4, false, alloc_tag::logits);  // temperature warper
  g.drop(next_logits);
  tensor probs = pointwise(g, {scores}, {}, n, 4, false, alloc_tag::logits);  // softmax
  g.drop(scores);
  tensor noise = g.make(n, 4, alloc_tag::logits);  // multinomial: exponential_ noise
  tensor ratio = pointwise(g, {probs, noise}, {}, n, 4, false, alloc_tag::logits);
  g.drop(noise);
  g.drop(probs);
  tensor next = pointwise(g, {ratio}, {}, batch, 8);  // argmax
  g.drop(ratio);
  tensor kept = pointwise(g, {next}, {}, batch, 8);   // next * unfinished + pad * (1 - unfinished)
  g.drop(next);
  return kept;
}

tensor generate(synth_context& ctx, const generate_call& call, std::size_t prompt_len) {
  const model_state& actor = ctx.model(model_role::actor);
  const std::size_t b = call.sequences;
  graph g(ctx.builder, ctx.cost, /*grad_enabled=*/false);
  std::vector<kv_slot> cache(actor.desc.layers);
  tensor ids;   // None: the first step reads a view of the prompts
  tensor mask;
  tensor unfinished = g.make(b, 8, alloc_tag::activation);
  tensor cache_position = g.make(prompt_len, 8, alloc_tag::activation);
  for (std::size_t step = 0; step < call.new_tokens; ++step) {
    forward_request r;
    r.batch = b;
    r.q_len = step == 0 ? prompt_len : 1;
    r.kv_len = prompt_len + step;
    r.cache = &cache;
    r.cache_copies_prefill = ctx.job.prefill_cache_copy;
    r.dropout = ctx.job.dropout;  // generate() does not switch the actor to eval mode
    r.flash = ctx.job.flash_attention;
    r.head = head_output::last_logits;
    tensor next = sample(g, model_forward(g, actor, r), b, actor.desc.vocab);
    const std::size_t columns = prompt_len + step + 1;
    replace(g, ids, g.make(b * columns, 8, alloc_tag::output));          // torch.cat([input_ids, next])
    replace(g, mask, g.make(b * columns, 8, alloc_tag::activation));     // attention_mask grows
    tensor done = pointwise(g, {next}, {}, b, 1);                         // EOS stopping criterion
    replace(g, unfinished, pointwise(g, {unfinished, done}, {}, b, 8));  // unfinished & ~done
    g.drop(done);
    g.drop(next);
    replace(g, cache_position, g.make(1, 8, alloc_tag::activation));
    ctx.builder.advance_ns(ctx.cost.generate_step_overhead_ns);
    if (ctx.builder.overflowed()) break;  // past max_events: synthesize() reports it; stop decoding
  }
  for (kv_slot& slot : cache) {
    g.drop(slot.k);
    g.drop(slot.v);
  }
  g.drop(mask);
  g.drop(unfinished);
  g.drop(cache_position);
  return ids;
}

}  // namespace

void run_generation(synth_context& ctx, const iteration_shape& shape) {
  enter_phase(ctx, rlhf_phase::generation);
  graph g(ctx.builder, ctx.cost, /*grad_enabled=*/false);
  rollout_data& data = ctx.rollout;
  const std::size_t batch = ctx.job.batch;
  replace(g, data.queries, g.make(batch * shape.prompt_len, 8, alloc_tag::output));
  replace(g, data.query_mask, g.make(batch * shape.prompt_len, 8, alloc_tag::output));
  std::vector<tensor> outputs;
  for (const generate_call& call : shape.calls) outputs.push_back(generate(ctx, call, shape.prompt_len));
  // Pad every call's output to the longest response and concatenate.
  replace(g, data.sequences, g.make(batch * shape.sequence_len(), 8, alloc_tag::output));
  for (tensor& t : outputs) g.drop(t);
  replace(g, data.attention_mask, g.make(batch * shape.sequence_len(), 8, alloc_tag::output));
  replace(g, data.action_mask, g.make(batch * shape.response_len, 8, alloc_tag::output));
}

}  // namespace phasealloc::detail::synth
