#include <utility>

#include "layers.hpp"
#include "ops.hpp"

namespace phasealloc::detail::synth {
namespace {

// DynamicCache.update: the first call stores the projections (transformers 4.4x) or a copy of
// them (torch.cat onto an empty tensor, >= 4.56); later ones torch.cat them on.
void update_cache(graph& g, tensor& slot, tensor fresh, std::size_t numel, bool copy_first) {
  if (slot.id == 0 && !copy_first) {
    slot = std::move(fresh);
    return;
  }
  if (slot.id == 0) {
    slot = pointwise(g, {fresh}, {}, numel, fresh.elem_bytes, false, alloc_tag::kv_cache);
    g.drop(fresh);
    return;
  }
  tensor grown = pointwise(g, {slot, fresh}, {}, numel, slot.elem_bytes, false, alloc_tag::kv_cache);
  g.drop(slot);
  slot = grown;
  g.drop(fresh);
}

}  // namespace

tensor attention(graph& g, const layer_env& env, tensor q, tensor k, tensor v) {
  const model_desc& d = *env.desc;
  const std::size_t act = q.elem_bytes;
  const std::size_t hd = d.head_dim();
  const std::size_t b = env.batch;
  tensor keys;
  tensor values;
  if (env.cache != nullptr) {
    const std::size_t cached = b * d.kv_heads * env.kv_len * hd;
    update_cache(g, env.cache->k, std::move(k), cached, env.cache_copies_prefill);
    update_cache(g, env.cache->v, std::move(v), cached, env.cache_copies_prefill);
    keys = g.share(env.cache->k);
    values = g.share(env.cache->v);
  } else {
    keys = std::move(k);
    values = std::move(v);
  }
  if (!env.flash && d.kv_heads != d.heads) {  // repeat_kv: expand + reshape copies
    const std::size_t repeated = b * d.heads * env.kv_len * hd;
    tensor rk = pointwise(g, {keys}, {}, repeated, act);
    g.drop(keys);
    keys = rk;
    tensor rv = pointwise(g, {values}, {}, repeated, act);
    g.drop(values);
    values = rv;
  }
  const double qk_flops = 2.0 * static_cast<double>(b * d.heads * env.q_len) * static_cast<double>(env.kv_len * hd);
  const std::size_t out_numel = b * d.heads * env.q_len * hd;
  tensor out;
  if (env.flash) {
    op_desc op;
    op.inputs = {q, keys, values};
    op.saved = {q, keys, values};
    op.save_output = true;
    op.out_numel = out_numel;
    op.out_elem_bytes = act;
    op.flops = 2.0 * qk_flops;
    op.saved_extras_bytes = {b * d.heads * env.q_len * 4};  // softmax logsumexp
    // FlashAttention-2 backward: fp32 dq accumulator and softmax_d.
    op.backward_temps_bytes = {out_numel * 4, b * d.heads * env.q_len * 4};
    out = g.run(op);
  } else {
    const std::size_t scores = b * d.heads * env.q_len * env.kv_len;
    tensor raw = matmul(g, q, keys, scores, qk_flops);
    tensor scaled = pointwise(g, {raw}, {}, scores, act);  // * scaling
    g.drop(raw);
    tensor masked = pointwise(g, {scaled}, {}, scores, act);  // + causal_mask
    g.drop(scaled);
    tensor probs32 = pointwise(g, {masked}, {}, scores, 4, /*save_output=*/true);  // softmax(dtype=float32)
    g.drop(masked);
    tensor probs = cast(g, probs32, act);
    g.drop(probs32);
    out = matmul(g, probs, values, out_numel, qk_flops);
    g.drop(probs);
  }
  g.drop(q);
  g.drop(keys);
  g.drop(values);
  tensor contiguous = pointwise(g, {out}, {}, out_numel, act);  // transpose(1, 2).contiguous()
  g.drop(out);
  return contiguous;
}

tensor attention_residual(graph& g, const layer_env& env, tensor x, tensor q, tensor k, tensor v) {
  tensor attn = attention(g, env, std::move(q), std::move(k), std::move(v));
  tensor projected = linear(g, attn, env.tokens(), env.params->o);
  g.drop(attn);
  if (env.dropout) projected = dropout(g, std::move(projected));  // resid_dropout
  tensor h = add(g, x, projected);
  g.drop(x);
  g.drop(projected);
  return h;
}

tensor dropout(graph& g, tensor x) {
  op_desc op;
  op.inputs = {x};
  op.out_numel = x.numel;
  op.out_elem_bytes = x.elem_bytes;
  op.saved_extras_bytes = {x.numel};  // the bool mask; dropped at once when nothing records a node
  tensor out = g.run(op);
  g.drop(x);
  return out;
}

alloc_tag kv_projection_tag(const layer_env& env) noexcept {
  return env.cache != nullptr && env.cache->k.id == 0 ? alloc_tag::kv_cache : alloc_tag::activation;
}

}  // namespace phasealloc::detail::synth
