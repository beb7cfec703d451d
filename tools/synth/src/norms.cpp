#include "layers.hpp"
#include "ops.hpp"

namespace phasealloc::detail::synth {

tensor rms_norm(graph& g, const tensor& x, std::size_t tokens, std::size_t hidden, const norm_params& p) {
  const std::size_t n = tokens * hidden;
  const std::size_t act = x.elem_bytes;
  tensor x32 = cast(g, x, 4);
  tensor squared = pointwise(g, {x32}, {x32}, n, 4);
  tensor variance = pointwise(g, {squared}, {}, tokens, 4);
  g.drop(squared);
  tensor shifted = pointwise(g, {variance}, {}, tokens, 4);
  g.drop(variance);
  tensor rstd = pointwise(g, {shifted}, {}, tokens, 4, /*save_output=*/true);
  g.drop(shifted);
  tensor normed32 = pointwise(g, {x32, rstd}, {x32, rstd}, n, 4);
  g.drop(x32);
  g.drop(rstd);
  tensor normed = cast(g, normed32, act);
  g.drop(normed32);
  op_desc scale;
  scale.inputs = {normed};
  scale.saved = {normed};
  scale.weight = p.weight;
  scale.out_numel = n;
  scale.out_elem_bytes = act;
  scale.backward_temps_bytes = {n * act};  // grad * normed, before the sum over tokens
  tensor out = g.run(scale);
  g.drop(normed);
  return out;
}

tensor layer_norm(graph& g, const tensor& x, std::size_t tokens, std::size_t hidden, const norm_params& p) {
  op_desc op;
  op.inputs = {x};
  op.saved = {x};
  op.weight = p.weight;
  op.bias = p.bias;
  op.out_numel = tokens * hidden;
  op.out_elem_bytes = x.elem_bytes;
  op.saved_extras_bytes = {tokens * 4, tokens * 4};  // mean, rstd (fp32)
  return g.run(op);
}

}  // namespace phasealloc::detail::synth
