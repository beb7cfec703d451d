#include "phasealloc/policies/policy_registry.hpp"

#include <fmt/format.h>

#include "phasealloc/policies/basic_policy.hpp"
#include "phasealloc/policies/phasealloc_policy.hpp"
#include "phasealloc/policies/pytorch_policy.hpp"

namespace phasealloc {

std::vector<policy_entry> policy_names() {
  return {
      {"phasealloc", "phase-aware: page-granular growth, hole reclaim, adaptive release at transitions (default)",
       &phasealloc_policy::create},
      {"basic", "two pools, release everything on out-of-memory (the engine's test partner)", &basic_policy::create},
      {"pytorch", "PyTorch's native CUDACachingAllocator, configured with PYTORCH_CUDA_ALLOC_CONF keys (the baseline)",
       &pytorch_policy::create},
  };
}

policy_spec_parts split_policy_spec(std::string_view spec) noexcept {
  const std::size_t colon = spec.find(':');
  return {spec.substr(0, colon), colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1)};
}

result<std::unique_ptr<policy>, std::string> make_policy(std::string_view spec) {
  const auto [name, conf] = split_policy_spec(spec);
  std::string valid;
  for (const policy_entry& e : policy_names()) {
    if (e.name == name) return e.create(conf);
    valid += (valid.empty() ? "" : ", ") + std::string(e.name);
  }
  return fmt::format("unknown policy '{}' in \"{}\"; valid policies: {}", name, spec, valid);
}

}  // namespace phasealloc
