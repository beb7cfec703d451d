// Forward half of the simulated autograd: running ops and recording nodes.
#include "autograd.hpp"

#include <utility>

namespace phasealloc::detail::synth {

graph::graph(trace_builder& builder, const cost_model& cost, bool grad_enabled, param_grads params)
    : builder_(builder), cost_(cost), grad_enabled_(grad_enabled), params_(params) {}

std::uint32_t graph::new_variable(std::size_t bytes) {
  variables_.push_back({bytes, 0});
  return static_cast<std::uint32_t>(variables_.size() - 1);
}

tensor graph::run(const op_desc& op) {
  tensor out;
  out.numel = op.out_numel;
  out.elem_bytes = op.out_elem_bytes;
  out.id = builder_.alloc(out.bytes(), op.out_tag);

  double bytes = static_cast<double>(out.bytes()) + op.extra_bytes;
  bool tracked = grad_enabled_ && (trainable(op.weight) || trainable(op.bias));
  for (const tensor& in : op.inputs) {
    bytes += static_cast<double>(in.bytes());
    tracked = tracked || (grad_enabled_ && in.requires_grad());
  }
  builder_.advance_ns(cost_.op_ns(op.flops, bytes));

  // Extra outputs the kernel produces alongside (LayerNorm's mean / rstd, flash's logsumexp):
  // kept by the node when it exists, dropped at once otherwise.
  std::vector<alloc_id> extras;
  for (std::size_t extra : op.saved_extras_bytes) extras.push_back(builder_.alloc(extra, alloc_tag::activation));

  if (!tracked) {
    for (alloc_id id : extras) builder_.release(id);
    return out;
  }
  node n;
  for (const tensor& in : op.inputs) {
    if (!in.requires_grad()) continue;
    n.inputs.push_back(in.var);
    n.input_bytes.push_back(in.bytes());
  }
  for (const tensor& s : op.saved) {
    builder_.retain(s.id);
    n.saved.push_back(s.id);
  }
  if (op.save_output) {
    builder_.retain(out.id);
    n.saved.push_back(out.id);
  }
  n.saved.insert(n.saved.end(), extras.begin(), extras.end());
  out.var = new_variable(out.bytes());
  n.output = out.var;
  n.weight = trainable(op.weight) ? op.weight : no_param;
  n.bias = trainable(op.bias) ? op.bias : no_param;
  n.flops = op.flops;
  n.bytes = bytes;
  n.passthrough = op.passthrough;
  n.backward_temps_bytes = op.backward_temps_bytes;
  n.grad_tag = op.grad_tag;
  nodes_.push_back(std::move(n));
  return out;
}

tensor graph::make(std::size_t numel, std::size_t elem_bytes, alloc_tag tag) {
  tensor t;
  t.numel = numel;
  t.elem_bytes = elem_bytes;
  t.id = builder_.alloc(t.bytes(), tag);
  builder_.advance_ns(cost_.op_ns(0, static_cast<double>(t.bytes())));
  return t;
}

tensor graph::share(const tensor& t) {
  builder_.retain(t.id);
  return t;
}

void graph::drop(tensor& t) {
  builder_.release(t.id);
  t = tensor{};
}

tensor graph::checkpoint(tensor input, std::vector<tensor> keep, recompute_fn block) {
  if (!grad_enabled_) return block(*this, std::move(input));
  node n;
  n.checkpoint_input = input;
  builder_.retain(input.id);
  n.saved.push_back(input.id);
  for (const tensor& k : keep) {
    builder_.retain(k.id);
    n.saved.push_back(k.id);
  }
  if (input.requires_grad()) {
    n.inputs.push_back(input.var);
    n.input_bytes.push_back(input.bytes());
  }
  grad_enabled_ = false;
  tensor out = block(*this, std::move(input));
  grad_enabled_ = true;
  out.var = new_variable(out.bytes());
  n.output = out.var;
  n.recompute = std::move(block);
  nodes_.push_back(std::move(n));
  return out;
}

tensor graph::detached_requiring_grad(const tensor& t) {
  tensor alias = share(t);
  alias.var = new_variable(t.bytes());
  return alias;
}

}  // namespace phasealloc::detail::synth
