#include "ops.hpp"

#include <utility>

namespace phasealloc::detail::synth {
namespace {

// PyTorch hands cuBLAS a workspace from the caching allocator at the first matmul on a stream
// and keeps it: CUBLAS_WORKSPACE_CONFIG's default ":4096:2:16:8" is 2 x 4 MiB + 8 x 16 KiB.
constexpr std::size_t cublas_workspace_bytes = 2 * 4096 * 1024 + 8 * 16 * 1024;

void cublas_workspace(graph& g) {
  g.builder().alloc_once("cublas_workspace", cublas_workspace_bytes, alloc_tag::workspace);
}

}  // namespace

tensor linear(graph& g, const tensor& x, std::size_t tokens, const linear_params& p, alloc_tag tag) {
  cublas_workspace(g);
  const bool lora = p.lora_a != no_param;
  op_desc op;
  op.inputs = {x};
  // mm keeps its input only for the weight's grad: a frozen linear keeps nothing.
  if (g.param_requires_grad(p.weight)) op.saved = {x};
  op.out_numel = tokens * p.out;
  op.out_elem_bytes = x.elem_bytes;
  op.out_tag = lora ? alloc_tag::activation : tag;
  op.weight = p.weight;
  op.bias = p.bias;
  op.flops = 2.0 * static_cast<double>(tokens) * static_cast<double>(p.in) * static_cast<double>(p.out);
  op.extra_bytes = static_cast<double>(p.in * p.out * x.elem_bytes);
  tensor base = g.run(op);
  if (!lora) return base;
  // PEFT's lora.Linear: result = result + lora_B(lora_A(dropout(x))) * scaling (dropout 0: Identity).
  const linear_params a{p.lora_a, no_param, p.in, p.lora_rank};
  const linear_params b{p.lora_b, no_param, p.lora_rank, p.out};
  // The input is cast to the adapters' dtype (fp32 on a bf16 base); the sum is promoted to it and
  // cast back to the base's dtype at the end.
  tensor xin = cast(g, x, p.lora_elem_bytes);
  tensor down = linear(g, xin, tokens, a);
  g.drop(xin);
  tensor up = linear(g, down, tokens, b);
  g.drop(down);
  tensor scaled = pointwise(g, {up}, {}, up.numel, up.elem_bytes);
  g.drop(up);
  tensor sum = add(g, scaled, base, scaled.elem_bytes == base.elem_bytes ? tag : alloc_tag::activation);
  g.drop(base);
  g.drop(scaled);
  if (sum.elem_bytes == x.elem_bytes) return sum;
  tensor out = cast(g, sum, x.elem_bytes, tag);
  g.drop(sum);
  return out;
}

tensor matmul(graph& g, const tensor& a, const tensor& b, std::size_t out_numel, double flops) {
  cublas_workspace(g);
  op_desc op;
  op.inputs = {a, b};
  op.saved = {a, b};
  op.out_numel = out_numel;
  op.out_elem_bytes = a.elem_bytes;
  op.flops = flops;
  return g.run(op);
}

tensor pointwise(graph& g, std::vector<tensor> inputs, std::vector<tensor> saved, std::size_t numel,
                 std::size_t elem_bytes, bool save_output, alloc_tag tag) {
  op_desc op;
  op.inputs = std::move(inputs);
  op.saved = std::move(saved);
  op.save_output = save_output;
  op.out_numel = numel;
  op.out_elem_bytes = elem_bytes;
  op.out_tag = tag;
  op.grad_tag = tag == alloc_tag::logits ? alloc_tag::logits : alloc_tag::activation;
  return g.run(op);
}

tensor add(graph& g, const tensor& a, const tensor& b, alloc_tag tag) {
  op_desc op;
  op.inputs = {a, b};
  op.out_numel = a.numel;
  op.out_elem_bytes = a.elem_bytes;
  op.out_tag = tag;
  op.passthrough = true;
  return g.run(op);
}

tensor cast(graph& g, const tensor& x, std::size_t elem_bytes, alloc_tag tag) {
  if (x.elem_bytes == elem_bytes) return g.share(x);
  return pointwise(g, {x}, {}, x.numel, elem_bytes, false, tag);
}

}  // namespace phasealloc::detail::synth
