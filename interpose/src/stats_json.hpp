// The books as JSON: torch.cuda.memory_stats() keys, the per-phase measures, what phasealloc
// adds (device, policy, limits, misuse), and the host buffer pool ("host").
//
// Approach: the flat torch keys come from phasealloc::to_memory_stats, so they cannot drift from
// the engine's names; each phase_stats field is written under its own name, plus fragmentation.
// The "host" object uses torch.cuda.host_memory_stats()'s names ("allocations.current", ...) for
// host_pool_stats' fields. A device without an engine (or pool) answers the same keys with zeros
// (what torch answers before use); its host budget is the configured one.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "device_slot.hpp"
#include "phasealloc/host_pool.hpp"

namespace phasealloc::interpose {

/// The stats object of one device. `slot` may be nullptr (no engine yet): zeros.
/// `torch_device_count` is what PyTorch reported at CUDA initialisation (0 = not told).
nlohmann::json stats_to_json(const device_slot* slot, int ordinal, std::int64_t interpose_misuse,
                             int torch_device_count);

/// The host buffer pool's books under torch.cuda.host_memory_stats() names, plus num_reuses,
/// num_waits, num_over_budget and budget_bytes.
nlohmann::json host_pool_to_json(const host_pool_stats& stats);

/// One phase_stats as JSON (every field, and fragmentation).
nlohmann::json phase_to_json(const phase_stats& phase);

}  // namespace phasealloc::interpose
