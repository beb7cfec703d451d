#include "phasealloc/synth/alloc_tag.hpp"

namespace phasealloc {

std::string_view to_string(alloc_tag tag) noexcept {
  switch (tag) {
    case alloc_tag::parameter: return "parameter";
    case alloc_tag::gradient: return "gradient";
    case alloc_tag::optimizer_state: return "optimizer_state";
    case alloc_tag::kv_cache: return "kv_cache";
    case alloc_tag::activation: return "activation";
    case alloc_tag::logits: return "logits";
    case alloc_tag::offload_chunk: return "offload_chunk";
    case alloc_tag::output: return "output";
    case alloc_tag::workspace: return "workspace";
  }
  return "unknown";
}

}  // namespace phasealloc
