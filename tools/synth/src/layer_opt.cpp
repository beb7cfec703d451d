#include <utility>

#include "layers.hpp"
#include "ops.hpp"

namespace phasealloc::detail::synth {

tensor opt_layer(graph& g, const layer_env& env, tensor x) {
  const model_desc& d = *env.desc;
  const layer_params& p = *env.params;
  const std::size_t tokens = env.tokens();
  const alloc_tag kv_tag = kv_projection_tag(env);

  tensor normed = layer_norm(g, x, tokens, d.hidden, p.attn_norm);
  tensor q = linear(g, normed, tokens, p.q);
  tensor k = linear(g, normed, tokens, p.k, kv_tag);
  tensor v = linear(g, normed, tokens, p.v, kv_tag);
  g.drop(normed);
  tensor h = attention_residual(g, env, std::move(x), std::move(q), std::move(k), std::move(v));

  tensor normed2 = layer_norm(g, h, tokens, d.hidden, p.mlp_norm);
  tensor fc1 = linear(g, normed2, tokens, p.up);
  g.drop(normed2);
  tensor relu = pointwise(g, {fc1}, {}, fc1.numel, fc1.elem_bytes, /*save_output=*/true);
  g.drop(fc1);
  tensor fc2 = linear(g, relu, tokens, p.down);
  g.drop(relu);
  tensor out = add(g, h, fc2);
  g.drop(h);
  g.drop(fc2);
  return out;
}

}  // namespace phasealloc::detail::synth
