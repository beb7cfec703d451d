// Backward half of the simulated autograd: running the tape in reverse.
#include <utility>
#include <vector>

#include "autograd.hpp"

namespace phasealloc::detail::synth {

void graph::accumulate(std::uint32_t var, alloc_id grad) {
  variable& v = variables_[var];
  if (v.grad == 0) {
    v.grad = grad;
    return;
  }
  builder_.advance_ns(cost_.op_ns(0, 3.0 * static_cast<double>(v.bytes)));
  if (builder_.references(v.grad) == 1 && v.grad != grad) {
    builder_.release(grad);  // InputBuffer: old_var.add_(var) in place
    return;
  }
  const alloc_id sum = builder_.alloc(v.bytes, alloc_tag::activation);  // shared: old_var + var
  builder_.release(v.grad);
  builder_.release(grad);
  v.grad = sum;
}

void graph::accumulate_param(std::size_t param) {
  if (!trainable(param)) return;
  const std::size_t bytes = (*params_.grad_bytes)[param];
  const alloc_id grad = builder_.alloc(bytes, alloc_tag::gradient);
  alloc_id& slot = (*params_.grad_ids)[param];
  if (slot == 0) {
    slot = grad;  // AccumulateGrad steals the fresh grad into .grad
    return;
  }
  builder_.advance_ns(cost_.op_ns(0, 3.0 * static_cast<double>(bytes)));
  builder_.release(grad);  // .grad += new_grad
}

void graph::run_node(node& n) {
  alloc_id grad_out = 0;
  if (n.output != no_node) std::swap(grad_out, variables_[n.output].grad);
  if (grad_out == 0) {  // nothing downstream needed this output
    for (alloc_id id : n.saved) builder_.release(id);
    return;
  }
  if (n.recompute) {
    run_checkpoint(n, grad_out);
    return;
  }
  builder_.advance_ns(cost_.op_ns(2.0 * n.flops, 2.0 * n.bytes));
  std::vector<alloc_id> temps;
  for (std::size_t bytes : n.backward_temps_bytes) temps.push_back(builder_.alloc(bytes, alloc_tag::activation));
  for (std::size_t i = 0; i < n.inputs.size(); ++i) {
    alloc_id grad_in = 0;
    if (n.passthrough) {
      builder_.retain(grad_out);
      grad_in = grad_out;
    } else {
      grad_in = builder_.alloc(n.input_bytes[i], n.grad_tag);
    }
    accumulate(n.inputs[i], grad_in);
  }
  accumulate_param(n.weight);
  accumulate_param(n.bias);
  for (alloc_id id : temps) builder_.release(id);
  for (alloc_id id : n.saved) builder_.release(id);
  builder_.release(grad_out);
}

void graph::run_checkpoint(node& n, alloc_id grad_out) {
  graph inner(builder_, cost_, true, params_);
  tensor input = inner.detached_requiring_grad(n.checkpoint_input);
  const tensor input_alias = input;
  tensor output = n.recompute(inner, std::move(input));
  const alloc_id grad_in = inner.backward_from(output, grad_out, input_alias);
  inner.drop(output);
  if (grad_in != 0) {
    if (n.inputs.empty()) {
      builder_.release(grad_in);
    } else {
      accumulate(n.inputs.front(), grad_in);
    }
  }
  for (alloc_id id : n.saved) builder_.release(id);
}

void graph::release_tape() {
  for (variable& v : variables_) {
    builder_.release(v.grad);
    v.grad = 0;
  }
  nodes_.clear();
  variables_.clear();
}

void graph::backward(const tensor& loss) {
  if (!loss.requires_grad()) return;
  variables_[loss.var].grad = builder_.alloc(loss.bytes(), alloc_tag::activation);  // ones_like(loss)
  for (std::size_t i = nodes_.size(); i-- > 0;) run_node(nodes_[i]);
  release_tape();
}

alloc_id graph::backward_from(const tensor& output, alloc_id grad, const tensor& input) {
  if (!output.requires_grad()) {
    builder_.release(grad);
    release_tape();
    return 0;
  }
  variables_[output.var].grad = grad;
  for (std::size_t i = nodes_.size(); i-- > 0;) run_node(nodes_[i]);
  alloc_id grad_in = 0;
  if (input.requires_grad()) std::swap(grad_in, variables_[input.var].grad);
  release_tape();
  return grad_in;
}

}  // namespace phasealloc::detail::synth
