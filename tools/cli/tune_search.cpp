#include "tune_search.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace phasealloc::cli {

std::vector<std::string> default_tune_grids() {
  return {
      // PyTorch's own allocator, each key its own mechanism: expandable segments (grow in place,
      // no cached segment pinned by its split blocks), max_split_size_mb (large cached blocks are
      // not split for small requests), garbage_collection_threshold (cached blocks released when
      // reserved passes a share of the device).
      "pytorch",
      "pytorch:expandable_segments:True",
      "pytorch:max_split_size_mb:{128,512}",
      "pytorch:garbage_collection_threshold:0.8",
      // phasealloc: what is released at phase transitions x which holes are reclaimed before a new
      // peak (smaller runs: lower peak, more calls) x how much one growth maps.
      "phasealloc:release:{adaptive,all,none},reclaim_min_run:{32MiB,128MiB,512MiB},grow:{20MiB,64MiB}",
      // Small transition releases skipped or taken.
      "phasealloc:release:adaptive,release_threshold:{256MiB,4GiB},reclaim_min_run:{32MiB,128MiB}",
      // Rollout phases in a pool of their own.
      "phasealloc:release:{adaptive,all},phase_pools:true",
      // Blocks that outlived their phase interval before placed lowest-address (lifetime placement).
      "phasealloc:release:{adaptive,all},lifetime:true",
      // Growth by whole `grow` steps (fewer map calls, up to a step more at a peak), and the need
      // of a phase predicted from its absolute peak instead of what it adds to its entry level.
      "phasealloc:release:adaptive,grow_whole:true,reclaim_min_run:{32MiB,128MiB}",
      "phasealloc:release:adaptive,need_from_entry:false",
      // No hole reclaim: the fewest calls.
      "phasealloc:release:{adaptive,none},reclaim:false",
  };
}

std::vector<std::size_t> pareto_front(const std::vector<tune_candidate>& candidates) {
  std::vector<std::size_t> front;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const tune_candidate& c = candidates[i];
    if (c.refused()) continue;
    bool dominated = false;
    for (std::size_t j = 0; j < candidates.size() && !dominated; ++j) {
      const tune_candidate& o = candidates[j];
      if (j == i || o.refused()) continue;
      const bool no_worse = o.peak_reserved_bytes <= c.peak_reserved_bytes && o.device_calls <= c.device_calls;
      const bool better = o.peak_reserved_bytes < c.peak_reserved_bytes || o.device_calls < c.device_calls;
      // Equal on both: the first of them stays.
      dominated = no_worse && (better || j < i);
    }
    if (!dominated) front.push_back(i);
  }
  std::stable_sort(front.begin(), front.end(), [&](std::size_t a, std::size_t b) {
    return candidates[a].peak_reserved_bytes < candidates[b].peak_reserved_bytes;
  });
  return front;
}

result<double, std::string> parse_tune_weight(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    return fmt::format("--weight \"{}\": expected calls=W (the weight of device calls against peak reserved)", text);
  }
  const std::string_view key = text.substr(0, eq);
  if (key != "calls") return fmt::format("--weight \"{}\": unknown measure \"{}\" (the one weight is calls=W)", text, key);
  const std::string value(text.substr(eq + 1));
  char* end = nullptr;
  errno = 0;
  const double w = value.empty() ? NAN : std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || errno != 0 || !std::isfinite(w) || w < 0) {
    return fmt::format("--weight \"{}\": \"{}\" is not a finite number >= 0", text, value);
  }
  return w;
}

std::optional<std::size_t> recommend(const std::vector<tune_candidate>& candidates, const std::vector<std::size_t>& front,
                                     double calls_weight) {
  if (front.empty()) return std::nullopt;
  std::size_t lowest_peak = SIZE_MAX;
  std::int64_t fewest_calls = INT64_MAX;
  for (const std::size_t i : front) {
    lowest_peak = std::min(lowest_peak, candidates[i].peak_reserved_bytes);
    fewest_calls = std::min(fewest_calls, candidates[i].device_calls);
  }
  const auto score = [&](std::size_t i) {
    const double peak = static_cast<double>(candidates[i].peak_reserved_bytes) / static_cast<double>(std::max<std::size_t>(1, lowest_peak));
    const double calls = static_cast<double>(candidates[i].device_calls) / static_cast<double>(std::max<std::int64_t>(1, fewest_calls));
    return peak + calls_weight * calls;
  };
  std::size_t best = front.front();  // the front is by peak, lowest first: ties keep the lower peak
  for (const std::size_t i : front) {
    if (score(i) < score(best)) best = i;
  }
  return best;
}

namespace {

std::string_view offload_key(offload_replay offload) {
  switch (offload) {
    case offload_replay::recorded: return "offload:auto";
    case offload_replay::pressure: return "offload:pressure";
    case offload_replay::none: return "";
  }
  return "";
}

}  // namespace

bool is_pytorch_spec(std::string_view spec) { return spec == "pytorch" || spec.starts_with("pytorch:"); }

std::string paste_line(std::string_view spec, offload_replay offload) {
  constexpr std::string_view torch = "pytorch";
  if (spec == torch) return "PyTorch's own allocator with its defaults: leave PHASEALLOC and PYTORCH_CUDA_ALLOC_CONF unset";
  if (spec.starts_with("pytorch:")) {
    return fmt::format("PYTORCH_CUDA_ALLOC_CONF='{}'   (PyTorch's own allocator; leave PHASEALLOC unset)",
                       spec.substr(torch.size() + 1));
  }
  const std::string_view key = offload_key(offload);
  if (spec == "phasealloc") {
    return key.empty() ? "PHASEALLOC=1   (phasealloc's default policy)"
                       : fmt::format("PHASEALLOC=1 PHASEALLOC_CONF='{}'   (phasealloc's default policy)", key);
  }
  return fmt::format("PHASEALLOC=1 PHASEALLOC_CONF='policy:[{}]{}{}'", spec, key.empty() ? "" : ",", key);
}

std::string candidate_name(const tune_candidate& c) {
  const std::string_view key = is_pytorch_spec(c.spec) ? std::string_view() : offload_key(c.offload);
  return key.empty() ? c.spec : fmt::format("{} + {}", c.spec, key);
}

}  // namespace phasealloc::cli
