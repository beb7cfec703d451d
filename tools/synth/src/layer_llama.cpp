#include <utility>

#include "layers.hpp"
#include "ops.hpp"

namespace phasealloc::detail::synth {
namespace {

// apply_rotary_pos_emb for one of q / k: (t * cos) + (rotate_half(t) * sin).
tensor rotate(graph& g, const layer_env& env, tensor t, alloc_tag tag) {
  const std::size_t act = t.elem_bytes;
  tensor with_cos = pointwise(g, {t}, {env.shared.cos}, t.numel, act);
  tensor negated = pointwise(g, {t}, {}, t.numel / 2, act);       // -x2
  tensor rotated = pointwise(g, {negated, t}, {}, t.numel, act);   // cat((-x2, x1), -1)
  g.drop(negated);
  tensor with_sin = pointwise(g, {rotated}, {env.shared.sin}, t.numel, act);
  g.drop(rotated);
  tensor out = add(g, with_cos, with_sin, tag);
  g.drop(with_cos);
  g.drop(with_sin);
  g.drop(t);
  return out;
}

}  // namespace

tensor llama_layer(graph& g, const layer_env& env, tensor x) {
  const model_desc& d = *env.desc;
  const layer_params& p = *env.params;
  const std::size_t tokens = env.tokens();
  const std::size_t act = x.elem_bytes;
  const alloc_tag kv_tag = kv_projection_tag(env);

  tensor normed = rms_norm(g, x, tokens, d.hidden, p.attn_norm);
  tensor q = linear(g, normed, tokens, p.q);
  tensor k = linear(g, normed, tokens, p.k);
  tensor v = linear(g, normed, tokens, p.v, kv_tag);
  g.drop(normed);
  q = rotate(g, env, std::move(q), alloc_tag::activation);
  k = rotate(g, env, std::move(k), kv_tag);
  tensor h = attention_residual(g, env, std::move(x), std::move(q), std::move(k), std::move(v));

  tensor normed2 = rms_norm(g, h, tokens, d.hidden, p.mlp_norm);
  tensor gate = linear(g, normed2, tokens, p.gate);
  tensor activated = pointwise(g, {gate}, {gate}, gate.numel, act);  // silu saves its input
  g.drop(gate);
  tensor up = linear(g, normed2, tokens, p.up);
  g.drop(normed2);
  tensor product = pointwise(g, {activated, up}, {activated, up}, up.numel, act);
  g.drop(activated);
  g.drop(up);
  tensor down = linear(g, product, tokens, p.down);
  g.drop(product);
  tensor out = add(g, h, down);
  g.drop(h);
  g.drop(down);
  return out;
}

tensor transformer_layer(graph& g, const layer_env& env, tensor x) {
  return env.desc->family == model_family::llama ? llama_layer(g, env, std::move(x)) : opt_layer(g, env, std::move(x));
}

}  // namespace phasealloc::detail::synth
