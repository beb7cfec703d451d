// Everything the interpose layer keeps for one GPU ordinal: its device, policy, engine, the
// observer the engine reports to, and the trace recorder while a trace runs.
#pragma once

#include <memory>
#include <string>

#include "engine_observer.hpp"
#include "phasealloc/device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/policy.hpp"

namespace phasealloc {
class trace_recorder;
}

namespace phasealloc::interpose {

struct device_slot {
  device_slot(int ordinal_in, std::unique_ptr<device> dev_in, std::unique_ptr<policy> pol_in,
              engine_options options);
  ~device_slot();
  device_slot(const device_slot&) = delete;
  device_slot& operator=(const device_slot&) = delete;

  const int ordinal;
  // Declaration order is destruction order in reverse: the engine goes before its device and policy.
  std::unique_ptr<device> dev;
  std::unique_ptr<policy> pol;
  engine_observer observer;
  std::unique_ptr<engine> eng;

  // Trace state: owned by the registry's mutex (trace_control.cpp).
  std::unique_ptr<trace_recorder> recorder;
  std::string trace_path;
};

}  // namespace phasealloc::interpose
