// The interpose layer's configuration: PHASEALLOC_CONF, parsed and validated once per process.
//
// Design note
// Rationale: one string in PYTORCH_CUDA_ALLOC_CONF's grammar, read once at
//   initialisation and never during static initialisation, where a typo is an error that names
//   the key and lists the valid ones. The policy key carries a whole policy spec, which has ':'
//   and ',' of its own ("pytorch:expandable_segments:True,max_split_size_mb:128").
// Approach: parse_conf splits the top level; a value in square brackets keeps its commas
//   (brackets nest), so
//     PHASEALLOC_CONF="device:cuda_vmm,policy:[pytorch:expandable_segments:True,max_split_size_mb:128],strict:false"
//   gives policy = "pytorch:expandable_segments:True,max_split_size_mb:128" (the outer brackets
//   are removed for `policy` and `trace`). A spec without a top-level comma needs no brackets:
//   "policy:pytorch:expandable_segments:True". The policy spec is built once here (make_policy) so
//   a bad one fails at the first use, not at the first allocation on some device.
//   The process configuration is read at the first call that needs it: the text given to
//   phasealloc_configure() if that came first, else getenv("PHASEALLOC_CONF"), else defaults.
//   Roles: processes of one job that need different settings (a trainer and a rollout engine of
//   an RLHF job, Ray actors started from one environment) share one PHASEALLOC_CONF with a section
//   per role, `roles:[rollout:[policy:[phasealloc:release:all]],trainer:[trace:[/t/%R.%p.patrace]]]`;
//   a process takes its role from the `role` key, else PHASEALLOC_ROLE (set per actor, e.g. in a Ray
//   actor's runtime_env), and its section's keys replace the top-level ones. The effective
//   configuration spells out the resolved keys and `role:NAME`, never `roles`, so pasted back it
//   configures the same process.
// Limitations: the configuration cannot change once read (engines were built from it). One role
//   per process.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc::interpose {

enum class device_kind { auto_select, cuda_vmm, cuda_runtime, model };

std::string_view to_string(device_kind kind) noexcept;

struct interpose_config {
  device_kind device = device_kind::auto_select;
  std::string policy_spec;            ///< The spec as given (outer brackets removed) or the default.
  std::string effective_policy_spec;  ///< policy::spec() of a policy built from it: every option spelled out.
  bool strict = false;                ///< Misuse aborts with the evidence.
  bool check_invariants = false;      ///< Run the engine's invariant checker after every operation (slow).
  std::string trace_pattern;          ///< Record from the start to this path pattern ("" = no trace).
  std::size_t model_capacity_bytes = 80 * gib;
  bool model_virtual_memory = true;     ///< The model device behaves like cuda_vmm (true) or cudaMalloc (false).
  std::size_t vmm_page_bytes = 0;     ///< cuda_vmm page size (0: the driver's granularity).
  /// Most page-locked bytes each GPU ordinal's host buffer pool holds (0: no pool).
  std::size_t host_budget_bytes = 2 * gib;
  /// Most bytes each GPU ordinal's same-address offload holds on the host (0: no limit but the host's).
  std::size_t offload_host_budget_bytes = 0;
  /// Automatic same-address offload of idle state (python/phasealloc/_auto_offload.py): "none",
  /// "pressure" (only when an allocation runs out of memory) or "auto" (at every phase transition).
  std::string offload_mode = "none";
  std::string role;                   ///< This process's role ("" = none): its `roles` section applied.
  std::string source;                 ///< Where the text came from, for messages.
};

/// The policy used when PHASEALLOC_CONF names none: the first registered of phasealloc, pytorch, basic.
std::string default_policy_spec();

/// Parses and validates a configuration text. `source` labels errors ("PHASEALLOC_CONF");
/// `process_role` is the role when the text has no `role` key (PHASEALLOC_ROLE for the process).
result<interpose_config, std::string> parse_interpose_config(std::string_view text, std::string_view source,
                                                             std::string_view process_role = {});

/// The configuration in the PHASEALLOC_CONF grammar with every key spelled out; parsing it again
/// gives the same configuration.
std::string format_interpose_config(const interpose_config& config);

/// The process's configuration, read at the first call (thread-safe): PHASEALLOC_CONF (or the
/// configured text) for the role PHASEALLOC_ROLE names; the reference stays valid.
const result<interpose_config, std::string>& process_config();

/// Gives the text to use instead of PHASEALLOC_CONF. Too late once process_config() was read,
/// unless `text` equals what is in force. Returns an error message, or "" on success.
std::string configure_process(std::string_view text);

}  // namespace phasealloc::interpose
