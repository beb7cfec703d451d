// The CLI's option values: the first byte picks the parser, the rest is the text a user
// typed. Whatever is accepted must hold what the commands rely on.
//   0: --capacity (1 .. 1 PiB)   1: --jobs (1 .. the machine)   2: sweep --grid (at most the limit)
//   3: synth JOB (valid, and to_conf parses back to the same job)
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cli_options.hpp"
#include "phasealloc/synth/job_conf.hpp"
#include "phasealloc/synth/rlhf_job.hpp"
#include "sweep_grid.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto capacity = phasealloc::cli::parse_capacity_option(text);
      if (capacity && (capacity.value() == 0 || capacity.value() > phasealloc::cli::max_capacity_bytes)) {
        __builtin_trap();  // an out-of-range capacity was accepted
      }
      if (!capacity && capacity.error().find("--capacity") == std::string::npos) __builtin_trap();
      break;
    }
    case 1: {
      unsigned long long jobs = 0;
      (void)std::from_chars(text.data(), text.data() + text.size(), jobs);
      for (const unsigned machine : {0u, 1u, 2u, 64u}) {
        auto checked = phasealloc::cli::check_jobs_option(jobs, machine);
        if (checked && (checked.value() == 0 || checked.value() > (machine == 0 ? 1u : machine))) __builtin_trap();
      }
      break;
    }
    case 2: {
      auto specs = phasealloc::cli::expand_grid(text, 256);
      if (specs && specs.value().size() > 256) __builtin_trap();  // the limit was not kept
      break;
    }
    case 3: {
      if (text.size() > 4096) break;
      auto job = phasealloc::parse_job(text);
      if (!job) break;
      if (!phasealloc::validate_job(job.value())) __builtin_trap();  // parse_job returned an invalid job
      const std::string conf = phasealloc::to_conf(job.value());
      auto again = phasealloc::parse_job(conf);
      if (!again || phasealloc::to_conf(again.value()) != conf) __builtin_trap();  // to_conf lost something
      break;
    }
  }
  return 0;
}
