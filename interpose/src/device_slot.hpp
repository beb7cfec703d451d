// Everything the interpose layer keeps for one GPU ordinal: its device, policy, engine, the
// observer the engine reports to, the host buffer pool for offload copies, and the trace recorder
// while a trace runs.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine_observer.hpp"
#include "host_pool_slot.hpp"
#include "phasealloc/device.hpp"
#include "phasealloc/engine.hpp"
#include "phasealloc/host_memory.hpp"
#include "phasealloc/policy.hpp"

namespace phasealloc {
class trace_recorder;
}

namespace phasealloc::interpose {

struct device_slot {
  device_slot(int ordinal_in, std::unique_ptr<device> dev_in, std::unique_ptr<policy> pol_in,
              engine_options options, std::unique_ptr<host_memory> host_memory_in,
              std::size_t host_budget_bytes);
  ~device_slot();
  device_slot(const device_slot&) = delete;
  device_slot& operator=(const device_slot&) = delete;

  const int ordinal;
  // Declaration order is destruction order in reverse: the engine and the host pool go before
  // the device and policy they use.
  std::unique_ptr<device> dev;
  std::unique_ptr<policy> pol;
  engine_observer observer;
  std::unique_ptr<engine> eng;
  host_pool_slot host;  ///< Offload buffers; the pool is built at the first phasealloc_host_alloc.

  // Trace state: owned by the registry's mutex (trace_control.cpp).
  std::unique_ptr<trace_recorder> recorder;
  std::string trace_path;
};

}  // namespace phasealloc::interpose
