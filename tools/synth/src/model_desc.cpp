#include "phasealloc/synth/model_desc.hpp"

#include "param_layout.hpp"

namespace phasealloc {

std::string_view to_string(model_family family) noexcept {
  switch (family) {
    case model_family::llama: return "llama";
    case model_family::opt: return "opt";
    case model_family::gpt2: return "gpt2";
  }
  return "?";
}

std::optional<model_family> parse_model_family(std::string_view name) noexcept {
  if (name == "llama") return model_family::llama;
  if (name == "opt") return model_family::opt;
  if (name == "gpt2") return model_family::gpt2;
  return std::nullopt;
}

std::string_view to_string(model_role role) noexcept {
  switch (role) {
    case model_role::actor: return "actor";
    case model_role::critic: return "critic";
    case model_role::reference: return "reference";
    case model_role::reward: return "reward";
  }
  return "unknown";
}

std::size_t parameter_count(const model_desc& desc, model_role role) {
  return detail::synth::make_layout(desc, role).total_numel();
}

}  // namespace phasealloc
