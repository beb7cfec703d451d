#include "device_slot.hpp"

#include "phasealloc/trace/trace_recorder.hpp"

namespace phasealloc::interpose {

device_slot::device_slot(int ordinal_in, std::unique_ptr<device> dev_in, std::unique_ptr<policy> pol_in,
                         engine_options options, std::unique_ptr<host_memory> host_memory_in,
                         std::size_t host_budget_bytes)
    : ordinal(ordinal_in),
      dev(std::move(dev_in)),
      pol(std::move(pol_in)),
      eng(std::make_unique<engine>(*dev, *pol, options)),
      host(*dev, std::move(host_memory_in), host_budget_bytes) {
  observer.set_ordinal(ordinal);
  eng->set_trace_sink(&observer);
}

device_slot::~device_slot() = default;

}  // namespace phasealloc::interpose
