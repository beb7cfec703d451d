// The books as JSON: torch.cuda.memory_stats() keys, the per-phase measures, and what phasealloc
// adds (device, policy, limits, misuse).
//
// Approach: the flat torch keys come from phasealloc::to_memory_stats, so they cannot drift from
// the engine's names; each phase_stats field is written under its own name, plus fragmentation.
// A device without an engine answers the same keys with zeros (what torch answers before use).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "device_slot.hpp"

namespace phasealloc::interpose {

/// The stats object of one device. `slot` may be nullptr (no engine yet): zeros.
/// `torch_device_count` is what PyTorch reported at CUDA initialisation (0 = not told).
nlohmann::json stats_to_json(const device_slot* slot, int ordinal, std::int64_t interpose_misuse,
                             int torch_device_count);

/// One phase_stats as JSON (every field, and fragmentation).
nlohmann::json phase_to_json(const phase_stats& phase);

}  // namespace phasealloc::interpose
