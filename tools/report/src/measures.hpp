// Comparisons across policies that more than one part of the page states.
#pragma once

#include <cstddef>
#include <optional>

#include "phasealloc/report/report.hpp"

namespace phasealloc::report_detail {

/// The policy with the lowest peak reserved among those without OOMs (one that failed
/// allocations reserved less by not serving them); nullopt with fewer than two policies or when
/// no policy is strictly lower than another.
std::optional<std::size_t> lowest_peak_policy(const report_input& input);

}  // namespace phasealloc::report_detail
