// A simulated PyTorch autograd: tensors as reference-counted allocations, a tape of nodes, and
// a backward pass that allocates, accumulates and releases the way torch.autograd does.
//
// Design note
// Rationale: the order and sizes of training-phase allocations come from autograd's rules, not
//   from the model: which tensors a node saves, when a saved tensor dies (after its node runs in
//   backward), when grads of one variable accumulate in place or out of place, when a parameter
//   grad is created (first backward after zero_grad(set_to_none)) or accumulated (later
//   micro-steps). Writing those rules once lets each model's forward be written like its Python.
// Approach: run() allocates an op's output; with grad enabled and an input (or a trainable
//   parameter) that requires grad, it records a node holding references to what the op saves.
//   backward() seeds the loss grad and visits nodes in reverse creation order (PyTorch's
//   single-device order: a node's sequence number is larger than its inputs'). A node allocates
//   one grad per input (or hands the output grad through, for add / branch ops), accumulates it
//   into the input variable (in place when that grad is not shared, else out of place), produces
//   parameter grads (stolen into .grad when there is none, else added in place and freed), then
//   releases its saved tensors and its output's grad. A checkpoint node re-runs a forward in a
//   nested graph with grad enabled and back-propagates through it.
// Limitations: views are free and alias their base (callers pass the base tensor); an op's
//   backward-only temporaries all live for the whole node; dtypes matter only through sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "cost_model.hpp"
#include "phasealloc/synth/alloc_tag.hpp"
#include "trace_builder.hpp"

namespace phasealloc::detail::synth {

inline constexpr std::uint32_t no_node = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::size_t no_param = std::numeric_limits<std::size_t>::max();

/// One Python reference to a tensor. A default tensor is "None".
struct tensor {
  alloc_id id = 0;
  std::size_t numel = 0;
  std::size_t elem_bytes = 0;
  std::uint32_t var = no_node;  ///< Autograd variable index; no_node = does not require grad.

  std::size_t bytes() const noexcept { return numel * elem_bytes; }
  bool requires_grad() const noexcept { return var != no_node; }
};

/// The .grad slots of a trained model's parameters (indexed like its param_layout).
struct param_grads {
  std::vector<alloc_id>* grad_ids = nullptr;
  const std::vector<std::size_t>* grad_bytes = nullptr;
  const std::vector<bool>* trainable = nullptr;  ///< Which require grad (null: all of them).
};

class graph;
/// Re-runs a forward from its (detached) input; used by checkpoint nodes.
using recompute_fn = std::function<tensor(graph&, tensor)>;

struct op_desc {
  std::vector<tensor> inputs;     ///< Data inputs; grads flow to those that require grad.
  std::vector<tensor> saved;      ///< Tensors the backward needs, held until it runs.
  bool save_output = false;       ///< The node saves its own result (softmax, rsqrt, relu).
  std::size_t out_numel = 0;
  std::size_t out_elem_bytes = 0;
  alloc_tag out_tag = alloc_tag::activation;
  std::size_t weight = no_param;  ///< Parameters whose grads the backward produces.
  std::size_t bias = no_param;
  double flops = 0;               ///< Forward FLOPs; backward costs twice that.
  double extra_bytes = 0;         ///< Bytes read besides inputs and output (weights), for timing.
  std::vector<std::size_t> saved_extras_bytes;  ///< Extra outputs the node keeps (mean / rstd, logsumexp).
  bool passthrough = false;       ///< Backward hands the output grad to every input unchanged (add).
  std::vector<std::size_t> backward_temps_bytes;  ///< Buffers the backward allocates and frees.
  alloc_tag grad_tag = alloc_tag::activation;  ///< Tag of the input grads the backward allocates.
};

class graph {
 public:
  /// `params` null: parameters do not require grad (frozen models, no_grad scoring).
  graph(trace_builder& builder, const cost_model& cost, bool grad_enabled, param_grads params = {});

  trace_builder& builder() noexcept { return builder_; }
  const cost_model& cost() const noexcept { return cost_; }
  bool grad_enabled() const noexcept { return grad_enabled_; }
  /// Whether autograd computes a grad for this parameter here (trained, not frozen, grad on).
  bool param_requires_grad(std::size_t param) const noexcept { return grad_enabled_ && trainable(param); }

  /// Runs an op: allocates its output (one Python reference) and, when autograd tracks it,
  /// records a node.
  tensor run(const op_desc& op);
  /// A new tensor outside autograd (inputs, masks, caches, sampling state).
  tensor make(std::size_t numel, std::size_t elem_bytes, alloc_tag tag);
  /// Another Python reference to `t`.
  tensor share(const tensor& t);
  /// Drops the reference `t` holds (like `del t`); `t` becomes None.
  void drop(tensor& t);
  /// torch.utils.checkpoint(block, input): runs `block` (which consumes `input`) under no_grad,
  /// keeping only `input` and `keep` for backward, which re-runs `block` with grad enabled.
  /// Without grad it is just block(input).
  tensor checkpoint(tensor input, std::vector<tensor> keep, recompute_fn block);

  /// loss.backward(): runs every node and releases everything the tape holds.
  void backward(const tensor& loss);
  /// Runs the tape with `grad` (an allocation, one reference taken) as the grad of `output`;
  /// returns the grad that reached `input` (one reference, 0 when none). Used by checkpointing.
  alloc_id backward_from(const tensor& output, alloc_id grad, const tensor& input);
  /// A detached alias of `t` that requires grad: the input of a recomputed block.
  tensor detached_requiring_grad(const tensor& t);

 private:
  struct variable {
    std::size_t bytes = 0;
    alloc_id grad = 0;
  };
  struct node {
    std::vector<std::uint32_t> inputs;  // variables that require grad
    std::vector<std::size_t> input_bytes;
    std::vector<alloc_id> saved;
    std::uint32_t output = no_node;
    std::size_t weight = no_param;
    std::size_t bias = no_param;
    double flops = 0;
    double bytes = 0;
    bool passthrough = false;
    std::vector<std::size_t> backward_temps_bytes;
    alloc_tag grad_tag = alloc_tag::activation;
    recompute_fn recompute;             // checkpoint nodes only
    tensor checkpoint_input;            // the saved input, for the recompute
  };

  bool trainable(std::size_t param) const noexcept {
    return param != no_param && params_.grad_ids != nullptr &&
           (params_.trainable == nullptr || (*params_.trainable)[param]);
  }
  std::uint32_t new_variable(std::size_t bytes);
  void accumulate(std::uint32_t var, alloc_id grad);
  void accumulate_param(std::size_t param);
  void run_node(node& n);
  void run_checkpoint(node& n, alloc_id grad_out);
  void release_tape();

  trace_builder& builder_;
  const cost_model& cost_;
  bool grad_enabled_;
  param_grads params_;
  std::vector<variable> variables_;
  std::vector<node> nodes_;
};

}  // namespace phasealloc::detail::synth
