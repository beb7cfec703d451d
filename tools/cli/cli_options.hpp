// The values of the CLI's options, checked before a command does any work: a capacity (bytes, with
// a unit) and a thread count. Errors name the option and the bound. Fuzzed (tests/fuzz).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "phasealloc/status.hpp"

namespace phasealloc::cli {

/// The largest simulated device: 1 PiB, beyond any GPU (and far from overflow in the engine's sums).
inline constexpr std::size_t max_capacity_bytes = std::size_t{1} << 50;

/// "80GiB" -> bytes: positive, at most max_capacity_bytes.
result<std::size_t, std::string> parse_capacity_option(std::string_view text);

/// A --jobs value: 1 .. hardware_threads (0 hardware threads, i.e. unknown, counts as 1).
result<unsigned, std::string> check_jobs_option(unsigned long long jobs, unsigned hardware_threads);

/// parse_capacity_option, throwing command_error (for the commands).
std::size_t parse_capacity(std::string_view text);
/// --link: a byte size per second ("50GB/s", "25GiB/s"; "/s" may be left out), above 0; throws
/// command_error naming the text otherwise.
std::size_t parse_link(std::string_view text);

}  // namespace phasealloc::cli
