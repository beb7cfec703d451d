#include <utility>

#include "layers.hpp"
#include "ops.hpp"

namespace phasealloc::detail::synth {
namespace {

// nn.ReLU: autograd keeps the output only.
tensor relu(graph& g, tensor x) {
  tensor out = pointwise(g, {x}, {}, x.numel, x.elem_bytes, /*save_output=*/true);
  g.drop(x);
  return out;
}

// HF NewGELUActivation (GPT-2's gelu_new), as the Python writes it:
//   0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
// Seven ffn-wide results; under autograd pow keeps x, tanh its output, and the final product
// both of its factors (0.5 * x and 1 + tanh), so four live on for backward besides the output.
tensor gelu_new(graph& g, tensor x) {
  const std::size_t n = x.numel;
  const std::size_t e = x.elem_bytes;
  tensor cubed = pointwise(g, {x}, {x}, n, e);          // torch.pow(x, 3.0)
  tensor scaled = pointwise(g, {cubed}, {}, n, e);      // 0.044715 * ...
  g.drop(cubed);
  tensor inner = add(g, x, scaled);                     // x + ...
  g.drop(scaled);
  tensor arg = pointwise(g, {inner}, {}, n, e);         // sqrt(2 / pi) * ...
  g.drop(inner);
  tensor th = pointwise(g, {arg}, {}, n, e, /*save_output=*/true);  // torch.tanh
  g.drop(arg);
  tensor one_plus = pointwise(g, {th}, {}, n, e);       // 1.0 + ...
  g.drop(th);
  tensor half_x = pointwise(g, {x}, {}, n, e);          // 0.5 * x
  g.drop(x);
  tensor out = pointwise(g, {half_x, one_plus}, {half_x, one_plus}, n, e);
  g.drop(half_x);
  g.drop(one_plus);
  return out;
}

}  // namespace

tensor opt_layer(graph& g, const layer_env& env, tensor x) {
  const model_desc& d = *env.desc;
  const layer_params& p = *env.params;
  const std::size_t tokens = env.tokens();
  const alloc_tag kv_tag = kv_projection_tag(env);

  tensor normed = layer_norm(g, x, tokens, d.hidden, p.attn_norm);
  tensor q, k, v;
  if (p.qkv.weight != no_param) {  // GPT-2: c_attn(x).split(hidden, dim=2): q, k, v are views of one tensor
    tensor qkv = linear(g, normed, tokens, p.qkv, kv_tag);
    q = g.share(qkv);
    k = g.share(qkv);
    v = g.share(qkv);
    g.drop(qkv);
  } else {
    q = linear(g, normed, tokens, p.q);
    k = linear(g, normed, tokens, p.k, kv_tag);
    v = linear(g, normed, tokens, p.v, kv_tag);
  }
  g.drop(normed);
  tensor h = attention_residual(g, env, std::move(x), std::move(q), std::move(k), std::move(v));

  tensor normed2 = layer_norm(g, h, tokens, d.hidden, p.mlp_norm);
  tensor fc1 = linear(g, normed2, tokens, p.up);
  g.drop(normed2);
  tensor act = d.family == model_family::gpt2 ? gelu_new(g, std::move(fc1))
                                              : relu(g, std::move(fc1));
  tensor fc2 = linear(g, act, tokens, p.down);
  g.drop(act);
  if (env.dropout) fc2 = dropout(g, std::move(fc2));
  tensor out = add(g, h, fc2);
  g.drop(h);
  g.drop(fc2);
  return out;
}

}  // namespace phasealloc::detail::synth
