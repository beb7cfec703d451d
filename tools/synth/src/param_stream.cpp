#include "param_stream.hpp"

namespace phasealloc::detail::synth {

param_stream::param_stream(trace_builder& builder, const cost_model& cost, const model_state& model)
    : builder_(builder), cost_(cost) {
  const param_layout& l = model.layout;
  auto bytes_of = [&](std::size_t param) { return param == no_param ? 0 : model.param_bytes[param]; };
  chunk_bytes_.push_back(bytes_of(l.embed) + bytes_of(l.positions));
  for (const layer_params& layer : l.layers) {
    std::size_t bytes = 0;
    for (std::size_t i = layer.first; i < layer.last; ++i) bytes += model.param_bytes[i];
    chunk_bytes_.push_back(bytes);
  }
  chunk_bytes_.push_back(bytes_of(l.final_norm.weight) + bytes_of(l.final_norm.bias) + bytes_of(l.head.weight) +
                         bytes_of(l.head.bias));
  resident_.assign(chunk_bytes_.size(), 0);
}

void param_stream::load(std::size_t chunk) {
  if (chunk >= chunk_bytes_.size() || resident_[chunk] != 0) return;
  resident_[chunk] = builder_.alloc(chunk_bytes_[chunk], alloc_tag::offload_chunk, copy_stream);
  builder_.advance_ns(cost_.copy_ns(static_cast<double>(chunk_bytes_[chunk])));
}

void param_stream::use(std::size_t chunk) {
  load(chunk);
  builder_.record_stream(resident_[chunk], compute_stream);
  load(chunk + 1);
}

void param_stream::done(std::size_t chunk) {
  builder_.release(resident_[chunk]);
  resident_[chunk] = 0;
}

}  // namespace phasealloc::detail::synth
