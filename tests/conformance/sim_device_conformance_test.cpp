// The device conformance suite on the sim, in each of its modes.
#include <memory>

#include "device_conformance.hpp"
#include "phasealloc/devices/sim_device.hpp"

namespace phasealloc::conformance {
namespace {

device_factory sim_factory(std::string name, sim_config config) {
  return {std::move(name), [config] { return made_device{std::make_unique<sim_device>(config), {}}; }, true};
}

sim_config runtime_like() {  // cudaMalloc-like: reserve is memory, no map/unmap
  return {.capacity_bytes = 1 * gib, .granularity_bytes = 2 * mib, .virtual_memory = false};
}

sim_config vmm_like() {  // cuMem-like: reserve is address space, map/unmap any granule range
  return {.capacity_bytes = 1 * gib, .granularity_bytes = 2 * mib, .virtual_memory = true};
}

sim_config runtime_like_fine_grained() {  // cuda_runtime_device's 512-byte granularity, odd capacity
  return {.capacity_bytes = 64 * mib + 3 * 512, .granularity_bytes = 512, .virtual_memory = false};
}

INSTANTIATE_TEST_SUITE_P(Sim, DeviceConformanceTest,
                         ::testing::Values(sim_factory("runtime_like", runtime_like()),
                                           sim_factory("vmm_like", vmm_like()),
                                           sim_factory("runtime_like_512", runtime_like_fine_grained())),
                         device_factory_name);

}  // namespace
}  // namespace phasealloc::conformance
