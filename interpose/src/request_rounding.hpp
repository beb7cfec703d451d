// Requests rounded as PyTorch's allocator rounds them, once the job asks for it at run time
// (phasealloc_set_request_divisions).
//
// Design note
// Rationale: torch.cuda.memory._set_allocator_settings("roundup_power2_divisions:...") is a job's
//   request, made in its code, that its blocks be sized by PyTorch's power-of-two divisions
//   (PyTorch's own test_allocator_settings checks the block sizes). phasealloc's policy sizes blocks
//   its own way, and the engine knows nothing of PyTorch's rule (allocator/ has no policy algorithm).
// Approach: the c10 bridge hands over the division table PyTorch parsed each time the settings
//   change at run time. Each request is then rounded by PyTorch's round_size (policies'
//   pytorch_rounding, the same model the `pytorch` policy uses), and the engine is asked for a block
//   of at least that size (engine::allocate's min_block_bytes), the request's own size staying its
//   requested bytes. A table of only 0s and 1s (PyTorch's default, which any settings without the key
//   restore) rounds nothing: phasealloc's own sizing.
// Limitations: process-wide, as PyTorch's setting is. PYTORCH_CUDA_ALLOC_CONF's divisions, read at
//   start, never reach here (phasealloc's policy sizes blocks then: interpose/README.md). Under the
//   `pytorch` policy with its own roundup_power2_divisions, its rounding applies on top.
#pragma once

#include <cstddef>
#include <string>

namespace phasealloc::interpose {

/// Sets the table: `divisions[i]` for interval i of PyTorch's 16, the intervals after `count` 0
/// (count 0: no rounding). Empty on success, else why the table was refused (more than 16
/// entries, a value neither 0 nor a power of two) and the previous one kept.
std::string set_request_divisions(const std::size_t* divisions, std::size_t count);

/// The least block size for a request of `bytes` under the table, or 0 when no rounding is set.
std::size_t min_block_bytes(std::size_t bytes) noexcept;

}  // namespace phasealloc::interpose
