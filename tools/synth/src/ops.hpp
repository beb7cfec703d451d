// The handful of op shapes transformer code is written with, on top of graph::run.
#pragma once

#include <cstddef>
#include <vector>

#include "autograd.hpp"
#include "param_layout.hpp"

namespace phasealloc::detail::synth {

/// x @ W^T (+ b) over `tokens` rows: saves x when W trains; grads of x, W, b. Output in x's
/// dtype. With LoRA adapters on `p`, PEFT's wrapped forward: base + B(A(x)) * scaling.
tensor linear(graph& g, const tensor& x, std::size_t tokens, const linear_params& p,
              alloc_tag tag = alloc_tag::activation);

/// a @ b (batched) producing `out_numel` elements in a's dtype: saves both; grads of both.
tensor matmul(graph& g, const tensor& a, const tensor& b, std::size_t out_numel, double flops);

/// An elementwise or reducing op producing `numel` elements of `elem_bytes`.
tensor pointwise(graph& g, std::vector<tensor> inputs, std::vector<tensor> saved, std::size_t numel,
                 std::size_t elem_bytes, bool save_output = false, alloc_tag tag = alloc_tag::activation);

/// a + b: the backward hands the grad to both unchanged.
tensor add(graph& g, const tensor& a, const tensor& b, alloc_tag tag = alloc_tag::activation);

/// x.to(dtype): a copy, or another reference to x when it already has that element size.
tensor cast(graph& g, const tensor& x, std::size_t elem_bytes, alloc_tag tag = alloc_tag::activation);

}  // namespace phasealloc::detail::synth
