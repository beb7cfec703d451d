// Expands a policy grid: every {a,b,c} group in a spec is replaced by each of its choices, and the
// groups multiply. "pytorch:max_split_size_mb:{64,256},garbage_collection_threshold:{0.6,0.8}"
// gives four specs. Braces never occur in the key:value grammar itself, so nothing is ambiguous.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/status.hpp"

namespace phasealloc::cli {

/// The specs of the grid, in order (last group varies fastest); errors name the bad brace.
/// At most `limit` specs.
result<std::vector<std::string>, std::string> expand_grid(std::string_view grid, std::size_t limit = 10'000);

}  // namespace phasealloc::cli
