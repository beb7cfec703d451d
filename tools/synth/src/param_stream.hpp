// Streaming the weights of a CPU-offloaded model through GPU chunk buffers during its forward
// (offload_params: reference and reward models, ZeRO-3 param offload / ProTrain non-persistent
// chunks).
//
// Design note
// Rationale: a frozen model used once per iteration need not occupy the GPU between uses; the
//   DeepSpeed-Chat `--offload_reference_model` / ZeRO-3 offload and ProTrain pattern fetches its
//   weights just ahead of use and drops them after, so a forward shows a rolling window of
//   layer-sized blocks allocated on a side stream.
// Approach: chunks in use order: embeddings, each layer, final norm + head (the tied embedding
//   again for an OPT LM head). use(i) makes sure chunk i is resident and prefetches chunk i + 1
//   (depth one, as ZeRO-3's prefetch bucket); each chunk is allocated on the copy stream and
//   record_stream'ed to the compute stream; done(i) frees it. Copy time is charged at load.
// Limitations: no overlap of copy and compute in the time model; one fixed prefetch depth.
#pragma once

#include <cstddef>
#include <vector>

#include "cost_model.hpp"
#include "model_state.hpp"
#include "trace_builder.hpp"

namespace phasealloc::detail::synth {

class param_stream {
 public:
  param_stream(trace_builder& builder, const cost_model& cost, const model_state& model);

  std::size_t chunk_count() const noexcept { return chunk_bytes_.size(); }
  /// Chunk indices: 0 embeddings, 1 + i layer i, chunk_count() - 1 the head.
  std::size_t layer_chunk(std::size_t layer) const noexcept { return 1 + layer; }
  std::size_t head_chunk() const noexcept { return chunk_bytes_.size() - 1; }

  void use(std::size_t chunk);
  void done(std::size_t chunk);

 private:
  void load(std::size_t chunk);

  trace_builder& builder_;
  const cost_model& cost_;
  std::vector<std::size_t> chunk_bytes_;
  std::vector<alloc_id> resident_;
};

}  // namespace phasealloc::detail::synth
