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
  op_desc op;
  op.inputs = {x};
  op.saved = {x};
  op.out_numel = tokens * p.out;
  op.out_elem_bytes = x.elem_bytes;
  op.out_tag = tag;
  op.weight = p.weight;
  op.bias = p.bias;
  op.flops = 2.0 * static_cast<double>(tokens) * static_cast<double>(p.in) * static_cast<double>(p.out);
  op.extra_bytes = static_cast<double>(p.in * p.out * x.elem_bytes);
  return g.run(op);
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
