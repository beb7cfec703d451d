#include "cli_options.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "commands.hpp"
#include "phasealloc/conf.hpp"
#include "phasealloc/oom_report.hpp"

namespace phasealloc::cli {

result<std::size_t, std::string> parse_capacity_option(std::string_view text) {
  const auto bytes = parse_bytes(text);
  if (!bytes) return fmt::format("--capacity: \"{}\" is not a byte size (e.g. 80GiB, 24GB, 512MiB)", text);
  if (*bytes == 0) return fmt::format("--capacity: \"{}\" is 0 bytes; a device needs some memory", text);
  if (*bytes > max_capacity_bytes) {
    return fmt::format("--capacity: \"{}\" is more than the largest model device, 1 PiB ({} bytes)", text,
                       max_capacity_bytes);
  }
  return *bytes;
}

result<unsigned, std::string> check_jobs_option(unsigned long long jobs, unsigned hardware_threads) {
  const unsigned machine = std::max(1u, hardware_threads);
  if (jobs == 0) return std::string("--jobs 0: at least one replay must run (use 1 or more)");
  if (jobs > machine) {
    return fmt::format("--jobs {}: this machine has {} hardware thread(s); use at most {}", jobs, machine, machine);
  }
  return static_cast<unsigned>(jobs);
}

std::size_t parse_link(std::string_view text) {
  std::string_view rate = text;
  if (rate.ends_with("/s")) rate.remove_suffix(2);
  const auto bytes = parse_bytes(rate);
  if (!bytes || *bytes == 0) {
    throw command_error(fmt::format("--link: \"{}\" is not a positive byte rate (e.g. 50GB/s, 25GiB/s)", text));
  }
  return *bytes;
}

std::size_t parse_capacity(std::string_view text) {
  auto r = parse_capacity_option(text);
  if (!r) throw command_error(r.error());
  return r.value();
}

}  // namespace phasealloc::cli
