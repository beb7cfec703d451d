// The tags `phasealloc synth` puts on allocation events: what each allocation is for.
//
// Tags are opaque to the trace format and to replays; they let a report (or a policy under
// test) group live bytes by purpose. Synthesized traces record the names in their metadata
// properties ("tag.1" = "parameter", ...), so a reader needs no copy of this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace phasealloc {

enum class alloc_tag : std::uint32_t {
  parameter = 1,        ///< Model weights and buffers: long-lived, never freed.
  gradient = 2,         ///< .grad tensors, accumulation temporaries, fp32 master-grad copies.
  optimizer_state = 3,  ///< AdamW exp_avg / exp_avg_sq and fp32 master weights (resident).
  kv_cache = 4,         ///< Generation's per-layer K and V, regrown by torch.cat every step.
  activation = 5,       ///< Forward / backward intermediates and optimizer foreach temporaries.
  logits = 6,           ///< Vocabulary-sized tensors: logits, log-softmax, sampling scores.
  offload_chunk = 7,    ///< GPU staging buffers of CPU-offloaded parameters or optimizer states.
  output = 8,           ///< Rollout data: prompts, sequences, log-probs, values, rewards, advantages.
  workspace = 9,        ///< Library workspaces (cuBLAS): allocated at first use, never freed.
};
inline constexpr std::uint32_t alloc_tag_first = 1;
inline constexpr std::uint32_t alloc_tag_last = 9;

/// "parameter", "gradient", ..., "output".
std::string_view to_string(alloc_tag tag) noexcept;

}  // namespace phasealloc
