// Policies by name: "basic", "pytorch", "phasealloc", each optionally followed by ':' and a
// configuration in the key:value,key:value grammar, e.g. "pytorch:expandable_segments:True".
// The same strings work in PHASEALLOC_CONF and on the CLI, so a policy tuned offline is pasted
// unchanged into a job.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/policy.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc {

struct policy_entry {
  std::string_view name;
  std::string_view summary;
  result<std::unique_ptr<policy>, std::string> (*create)(std::string_view conf);
};

/// A spec split at its first ':' into the policy's name and its configuration (empty when none).
struct policy_spec_parts {
  std::string_view name;
  std::string_view conf;
};
policy_spec_parts split_policy_spec(std::string_view spec) noexcept;

/// Every registered policy, in the order `phasealloc --help` lists them.
std::vector<policy_entry> policy_names();

/// Builds a policy from a spec; the error names what was wrong and lists the valid choices.
result<std::unique_ptr<policy>, std::string> make_policy(std::string_view spec);

}  // namespace phasealloc
