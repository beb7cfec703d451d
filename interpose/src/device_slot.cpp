#include "device_slot.hpp"

#include "phasealloc/trace/trace_recorder.hpp"

namespace phasealloc::interpose {

device_slot::device_slot(int ordinal_in, std::unique_ptr<device> dev_in, std::unique_ptr<policy> pol_in,
                         engine_options options)
    : ordinal(ordinal_in),
      dev(std::move(dev_in)),
      pol(std::move(pol_in)),
      eng(std::make_unique<engine>(*dev, *pol, options)) {
  eng->set_trace_sink(&observer);
}

device_slot::~device_slot() = default;

}  // namespace phasealloc::interpose
