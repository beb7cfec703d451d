// Policy specs (the CLI's --policy and PHASEALLOC_CONF's policy:[...]). Whatever parses
// must print a spec that parses to the same policy, ask for a memory fraction in (0, 1], and drive
// an engine with sizes at their extremes without aborting, its books sound after each operation.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policies/policy_registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace phasealloc;
  if (size > 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto made = make_policy(text);
  if (!made) {
    (void)made.error().size();
    return 0;
  }
  policy& pol = *made.value();
  const std::string spec = pol.spec();
  auto again = make_policy(spec);
  if (!again || again.value()->spec() != spec) __builtin_trap();  // spec() does not round-trip
  const double fraction = pol.memory_fraction();
  if (!(fraction > 0.0 && fraction <= 1.0)) __builtin_trap();  // the engine would abort on it

  bool virtual_memory = false;
  for (const pool_traits& t : pol.pools()) virtual_memory = virtual_memory || t.expandable;
  model_device dev(model_device_config{.capacity_bytes = gib, .virtual_memory = virtual_memory});
  engine eng(dev, pol, engine_options{.strict = true, .check_invariants = true});
  constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();
  std::vector<std::pair<device_address, std::size_t>> live;
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{513}, std::size_t{3} * mib + 1,
                                  std::size_t{300} * mib, gib + 1, size_max / 2, size_max}) {
    auto r = eng.allocate(bytes, 0);
    if (r) live.emplace_back(r.value(), bytes);
    else if (r.error().code != errc::out_of_memory) __builtin_trap();
  }
  eng.begin_phase("generation");
  for (const auto& [addr, bytes] : live) {
    if (eng.deallocate(addr, bytes) != errc::ok) __builtin_trap();
  }
  eng.end_phase();
  eng.empty_cache();
  if (eng.levels().allocated_bytes != 0) __builtin_trap();
  return 0;
}
