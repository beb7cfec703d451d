#include "model_forward.hpp"

#include <optional>
#include <utility>

#include "ops.hpp"
#include "param_stream.hpp"

namespace phasealloc::detail::synth {
namespace {

tensor embedding(graph& g, std::size_t table, std::size_t tokens, std::size_t hidden, std::size_t act) {
  op_desc op;
  op.weight = table;
  op.out_numel = tokens * hidden;
  op.out_elem_bytes = act;
  op.backward_temps_bytes = {tokens * 8, tokens * 8};  // embedding_dense_backward: sorted and original indices
  return g.run(op);
}

// LlamaRotaryEmbedding.forward: inv_freq @ position_ids, cat, cos / sin in fp32, cast.
void rotary_inputs(graph& g, shared_inputs& shared, std::size_t tokens, std::size_t head_dim, std::size_t act) {
  tensor freqs = g.make(tokens * head_dim / 2, 4, alloc_tag::activation);
  tensor emb = g.make(tokens * head_dim, 4, alloc_tag::activation);
  g.drop(freqs);
  tensor cos32 = g.make(tokens * head_dim, 4, alloc_tag::activation);
  tensor sin32 = g.make(tokens * head_dim, 4, alloc_tag::activation);
  g.drop(emb);
  shared.cos = act == 4 ? g.share(cos32) : g.make(tokens * head_dim, act, alloc_tag::activation);
  g.drop(cos32);
  shared.sin = act == 4 ? g.share(sin32) : g.make(tokens * head_dim, act, alloc_tag::activation);
  g.drop(sin32);
}

// The 4-D additive mask eager attention adds to its scores (causal + padding).
tensor attention_mask(graph& g, const forward_request& r, std::size_t act) {
  tensor causal = g.make(r.q_len * r.kv_len, act, alloc_tag::activation);
  tensor mask = g.make(r.batch * r.q_len * r.kv_len, act, alloc_tag::activation);
  g.drop(causal);
  return mask;
}

}  // namespace

tensor model_forward(graph& g, const model_state& m, const forward_request& r) {
  const model_desc& d = m.desc;
  const param_layout& l = m.layout;
  const std::size_t act = d.bytes_per_param;
  const std::size_t tokens = r.batch * r.q_len;
  std::optional<param_stream> stream;
  if (m.offloaded) stream.emplace(g.builder(), g.cost(), m);

  if (stream) stream->use(0);
  tensor positions = g.make(r.batch * r.kv_len, 8, alloc_tag::activation);  // mask.cumsum(-1) - 1
  tensor x = embedding(g, l.embed, tokens, d.hidden, act);
  shared_inputs shared;
  if (d.family != model_family::llama) {  // opt, gpt2: learned positions
    tensor pos = embedding(g, l.positions, tokens, d.hidden, act);
    tensor sum = add(g, x, pos);
    g.drop(x);
    g.drop(pos);
    x = sum;
    if (r.dropout) x = dropout(g, std::move(x));  // embd / drop
  } else {
    rotary_inputs(g, shared, tokens, d.head_dim(), act);
  }
  if (!r.flash) shared.mask = attention_mask(g, r, act);
  if (stream) stream->done(0);

  for (std::size_t i = 0; i < l.layers.size(); ++i) {
    if (stream) stream->use(stream->layer_chunk(i));
    layer_env env;
    env.desc = &d;
    env.params = &l.layers[i];
    env.batch = r.batch;
    env.q_len = r.q_len;
    env.kv_len = r.kv_len;
    env.flash = r.flash;
    env.cache = r.cache != nullptr ? &(*r.cache)[i] : nullptr;
    env.cache_copies_prefill = r.cache_copies_prefill;
    env.dropout = r.dropout && d.family != model_family::llama;  // Llama has no dropout layers
    env.shared = shared;
    if (r.checkpoint && g.grad_enabled()) {
      x = g.checkpoint(std::move(x), {shared.cos, shared.sin, shared.mask},
                       [env](graph& inner, tensor in) { return transformer_layer(inner, env, std::move(in)); });
    } else {
      x = transformer_layer(g, env, std::move(x));
    }
    if (stream) stream->done(stream->layer_chunk(i));
  }

  if (stream) stream->use(stream->head_chunk());
  tensor normed = d.family != model_family::llama ? layer_norm(g, x, tokens, d.hidden, l.final_norm)
                                                : rms_norm(g, x, tokens, d.hidden, l.final_norm);
  g.drop(x);
  tensor out;
  switch (r.head) {
    case head_output::all_logits: out = linear(g, normed, tokens, l.head, alloc_tag::logits); break;
    case head_output::last_logits: out = linear(g, normed, r.batch, l.head, alloc_tag::logits); break;
    case head_output::values: out = linear(g, normed, tokens, l.head); break;
  }
  g.drop(normed);
  if (stream) stream->done(stream->head_chunk());
  g.drop(positions);
  g.drop(shared.cos);
  g.drop(shared.sin);
  g.drop(shared.mask);
  return out;
}

}  // namespace phasealloc::detail::synth
