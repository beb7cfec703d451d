// A whole model's forward: embeddings, position inputs and masks, the layers (optionally under
// gradient checkpointing, optionally with offloaded weights streamed in), final norm and head.
#pragma once

#include <cstddef>
#include <vector>

#include "autograd.hpp"
#include "layers.hpp"
#include "model_state.hpp"

namespace phasealloc::detail::synth {

enum class head_output {
  all_logits,   ///< LM head over every position: (batch, len, vocab).
  last_logits,  ///< LM head over the last position only (generate with logits_to_keep=1).
  values,       ///< Scalar head over every position: (batch, len, 1).
};

struct forward_request {
  std::size_t batch = 0;
  std::size_t q_len = 0;                ///< Tokens per sequence fed in this call.
  std::size_t kv_len = 0;               ///< Keys per sequence after this call (= q_len without cache).
  std::vector<kv_slot>* cache = nullptr;  ///< Generation's dynamic cache, one slot per layer.
  bool cache_copies_prefill = false;    ///< rlhf_job::prefill_cache_copy.
  bool dropout = false;                 ///< Train-mode dropout layers (rlhf_job::dropout, trained models).
  bool checkpoint = false;              ///< Gradient checkpointing of every layer (grad graphs only).
  bool flash = false;
  head_output head = head_output::all_logits;
};

/// The head's output in the model dtype (tagged logits for LM heads).
tensor model_forward(graph& g, const model_state& m, const forward_request& r);

}  // namespace phasealloc::detail::synth
