// The role a process's title gives it, for naming its trace when no role is configured.
//
// Design note
// Rationale: a trace pattern's %R names the process's role, and a dry run of a Ray job shows each
//   worker's table under it. Frameworks do not set PHASEALLOC_ROLE, but Ray and vLLM title their
//   processes by what they run: "ray::WorkerDict.actor_rollout_compute_log_prob" (Ray: the actor
//   class, then the method running), "VLLM::Worker", "VLLM::EngineCore" (vLLM's processes).
// Approach: argv[0] as the kernel keeps it (/proc/self/cmdline, where setproctitle writes); the
//   name after "ray::" or "VLLM::": its letters, digits, '_' and '-' up to the first other
//   character (the '.' before Ray's method name), so it is always safe in a file name. Read when a trace file is
//   named (at a device's first use), by which time Ray has created the actor and titled it.
// Limitations: Linux only (elsewhere: no role). A Ray worker titled "ray::IDLE" (no actor yet)
//   gives "IDLE". A configured role (role key, PHASEALLOC_ROLE) always wins.
#pragma once

#include <string>
#include <string_view>

namespace phasealloc::interpose {

/// The role in a process title ("ray::WorkerDict.fit" -> "WorkerDict", "VLLM::Worker" -> "Worker"),
/// "" for any other title.
std::string role_from_title(std::string_view title);

/// role_from_title of this process's title ("" when it cannot be read).
std::string process_title_role();

}  // namespace phasealloc::interpose
