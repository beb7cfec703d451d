#include "interpose_config.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "phasealloc/conf.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc::interpose {
namespace {

constexpr std::string_view env_name = "PHASEALLOC_CONF";
constexpr const char* role_env_name = "PHASEALLOC_ROLE";

std::string process_role_from_environment() {
  const char* role = std::getenv(role_env_name);
  return role != nullptr ? std::string(role) : std::string();
}

/// "[a,b]" -> "a,b" when the first '[' closes at the very end; anything else unchanged.
std::string strip_brackets(std::string_view value) {
  if (value.size() < 2 || value.front() != '[' || value.back() != ']') return std::string(value);
  int depth = 0;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '[') ++depth;
    if (value[i] == ']' && --depth == 0 && i + 1 != value.size()) return std::string(value);
  }
  return std::string(value.substr(1, value.size() - 2));
}

/// Brackets a value that has a top-level comma (or starts with '['), so parse_conf keeps it whole.
std::string bracket_if_needed(std::string_view value) {
  int depth = 0;
  bool needs = !value.empty() && value.front() == '[';
  for (const char c : value) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) needs = true;
  }
  return needs ? fmt::format("[{}]", value) : std::string(value);
}

/// A role names a process kind (trainer, rollout, ...): letters, digits, '_' and '-', so it can
/// stand in a file name (the trace pattern's %R).
bool valid_role(std::string_view role) {
  return !role.empty() && std::all_of(role.begin(), role.end(), [](unsigned char ch) {
    return std::isalnum(ch) != 0 || ch == '_' || ch == '-';
  });
}

/// The entries of the process's role: `entries` with the `roles:[NAME:[...],...]` section of `role`
/// put over the top-level keys it repeats, and `role:ROLE` (when there is a role); `roles` itself is
/// dropped. Every section is checked, not only this process's, so a typo in another role's section
/// fails here too. The role is the `role` entry's, else `process_role` (PHASEALLOC_ROLE).
result<std::vector<conf_entry>, std::string> resolve_role(std::vector<conf_entry> entries, std::string_view process_role,
                                                          std::string_view source) {
  std::string role(process_role);
  std::optional<std::string> sections;
  for (auto it = entries.begin(); it != entries.end();) {
    if (it->key == "role") {
      role = it->value;
      it = entries.erase(it);
    } else if (it->key == "roles") {
      sections = strip_brackets(it->value);
      it = entries.erase(it);
    } else {
      ++it;
    }
  }
  if (!role.empty() && !valid_role(role)) {
    return fmt::format("{}: bad value for 'role': \"{}\" (a role is letters, digits, '_' and '-')", source, role);
  }
  if (sections) {
    auto named = parse_conf(*sections);
    if (!named) return fmt::format("{}: bad value for 'roles': {}", source, named.error());
    for (const conf_entry& section : named.value()) {
      const std::string where = fmt::format("{}, roles section '{}'", source, section.key);
      if (!valid_role(section.key)) {
        return fmt::format("{}: bad value for 'roles': \"{}\" is not a role name (letters, digits, '_' and '-')",
                           source, section.key);
      }
      auto keys = parse_conf(strip_brackets(section.value));
      if (!keys) return fmt::format("{}: {}", where, keys.error());
      for (const conf_entry& k : keys.value()) {
        if (k.key == "role" || k.key == "roles") {
          return fmt::format("{}: key '{}' cannot be set per role", where, k.key);
        }
      }
      // The section alone must be a valid configuration (its keys, its values).
      if (auto alone = parse_interpose_config(strip_brackets(section.value), where); !alone) return alone.error();
      if (section.key != role) continue;
      for (const conf_entry& k : keys.value()) {
        auto same = std::find_if(entries.begin(), entries.end(), [&](const conf_entry& e) { return e.key == k.key; });
        if (same != entries.end()) same->value = k.value;
        else entries.push_back(k);
      }
    }
  }
  if (!role.empty()) entries.push_back({"role", role});
  return entries;
}

struct process_state {
  std::mutex mutex;
  std::optional<std::string> configured_text;  ///< From phasealloc_configure(), before the first read.
  std::optional<result<interpose_config, std::string>> config;
  std::string text_in_force;
};

process_state& state() {
  static process_state* s = new process_state;  // leaked: used until the process is gone
  return *s;
}

}  // namespace

std::string_view to_string(device_kind kind) noexcept {
  switch (kind) {
    case device_kind::auto_select: return "auto";
    case device_kind::cuda_vmm: return "cuda_vmm";
    case device_kind::cuda_runtime: return "cuda_runtime";
    case device_kind::model: return "model";
  }
  return "auto";
}

std::string default_policy_spec() {
  const auto names = policy_names();
  for (const std::string_view preferred : {"phasealloc", "pytorch", "basic"}) {
    for (const policy_entry& e : names) {
      if (e.name == preferred) return std::string(preferred);
    }
  }
  return names.empty() ? std::string("basic") : std::string(names.front().name);
}

result<interpose_config, std::string> parse_interpose_config(std::string_view text, std::string_view source,
                                                             std::string_view process_role) {
  auto parsed = parse_conf(text);
  if (!parsed) return fmt::format("{}: {}", source, parsed.error());
  auto entries = resolve_role(std::move(parsed).value(), process_role, source);
  if (!entries) return entries.error();
  conf_reader reader(std::string(source), std::move(entries).value());
  interpose_config c;
  c.source = std::string(source);
  if (auto v = reader.get_string("role")) c.role = *v;
  (void)reader.get_string("roles");  // resolved above: listed among the valid keys
  if (auto v = reader.get_string("device")) {
    if (*v == "auto") c.device = device_kind::auto_select;
    else if (*v == "cuda_vmm") c.device = device_kind::cuda_vmm;
    else if (*v == "cuda_runtime") c.device = device_kind::cuda_runtime;
    else if (*v == "model") c.device = device_kind::model;
    else reader.fail("device", fmt::format("\"{}\" is not a device (expected auto, cuda_vmm, cuda_runtime or model)", *v));
  }
  if (auto v = reader.get_string("policy")) c.policy_spec = strip_brackets(*v);
  if (auto v = reader.get_bool("strict")) c.strict = *v;
  if (auto v = reader.get_bool("check_invariants")) c.check_invariants = *v;
  if (auto v = reader.get_string("trace")) c.trace_pattern = strip_brackets(*v);
  if (auto v = reader.get_bytes("model_capacity")) {
    if (*v == 0) reader.fail("model_capacity", "must be positive");
    c.model_capacity_bytes = *v;
  }
  if (auto v = reader.get_bool("model_virtual_memory")) c.model_virtual_memory = *v;
  if (auto v = reader.get_bytes("vmm_page")) c.vmm_page_bytes = *v;
  if (auto v = reader.get_bytes("host_budget")) c.host_budget_bytes = *v;
  if (auto v = reader.get_bytes("offload_host_budget")) c.offload_host_budget_bytes = *v;
  if (auto v = reader.get_string("offload")) {
    if (*v == "none" || *v == "auto" || *v == "pressure") c.offload_mode = *v;
    else reader.fail("offload", fmt::format("\"{}\" is not an offload mode (expected none, pressure or auto)", *v));
  }
  if (auto error = reader.finish()) return *error;

  if (c.policy_spec.empty()) c.policy_spec = default_policy_spec();
  auto probe = make_policy(c.policy_spec);
  if (!probe) return fmt::format("{}: bad value for 'policy': {}", source, probe.error());
  c.effective_policy_spec = probe.value()->spec();
  return c;
}

std::string format_interpose_config(const interpose_config& c) {
  std::string out = fmt::format(
      "device:{},policy:{},strict:{},check_invariants:{},model_capacity:{},model_virtual_memory:{},vmm_page:{},"
      "host_budget:{},offload_host_budget:{},offload:{}",
      to_string(c.device), bracket_if_needed(c.effective_policy_spec), c.strict, c.check_invariants,
      c.model_capacity_bytes, c.model_virtual_memory, c.vmm_page_bytes, c.host_budget_bytes,
      c.offload_host_budget_bytes, c.offload_mode);
  if (!c.trace_pattern.empty()) out += ",trace:" + bracket_if_needed(c.trace_pattern);
  if (!c.role.empty()) out += ",role:" + c.role;
  return out;
}

const result<interpose_config, std::string>& process_config() {
  process_state& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.config) {
    std::string source(env_name);
    if (s.configured_text) {
      s.text_in_force = *s.configured_text;
      source = "phasealloc_configure";
    } else if (const char* env = std::getenv(std::string(env_name).c_str())) {
      s.text_in_force = env;
    }
    s.config.emplace(parse_interpose_config(s.text_in_force, source, process_role_from_environment()));
  }
  return *s.config;
}

std::string configure_process(std::string_view text) {
  process_state& s = state();
  std::lock_guard lock(s.mutex);
  if (s.config) {
    if (text == s.text_in_force) return {};
    return fmt::format("phasealloc_configure(\"{}\") comes too late: the configuration \"{}\" was already read "
                       "at first use; configure before the first allocation or query",
                       text, s.text_in_force);
  }
  // Validate now, so the caller hears about a bad text at once; keep it for the first read.
  auto parsed = parse_interpose_config(text, "phasealloc_configure", process_role_from_environment());
  if (!parsed) return parsed.error();
  s.configured_text = std::string(text);
  return {};
}

}  // namespace phasealloc::interpose
