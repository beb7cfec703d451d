// The device conformance suite on the model device, in each of its modes.
#include <memory>

#include "device_conformance.hpp"
#include "phasealloc/devices/model_device.hpp"

namespace phasealloc::conformance {
namespace {

device_factory model_factory(std::string name, model_device_config config) {
  return {std::move(name), [config] { return made_device{std::make_unique<model_device>(config), {}}; }, true};
}

model_device_config runtime_like() {  // cudaMalloc-like: reserve is memory, no map/unmap
  return {.capacity_bytes = 1 * gib, .granularity_bytes = 2 * mib, .virtual_memory = false};
}

model_device_config vmm_like() {  // cuMem-like: reserve is address space, map/unmap any granule range
  return {.capacity_bytes = 1 * gib, .granularity_bytes = 2 * mib, .virtual_memory = true};
}

model_device_config vmm_like_host_backed() {  // cuMem-like with host-located memory (offload)
  return {.capacity_bytes = 1 * gib, .granularity_bytes = 2 * mib, .virtual_memory = true, .host_backing = true};
}

model_device_config runtime_like_fine_grained() {  // cuda_runtime_device's 512-byte granularity, odd capacity
  return {.capacity_bytes = 64 * mib + 3 * 512, .granularity_bytes = 512, .virtual_memory = false};
}

INSTANTIATE_TEST_SUITE_P(Model, DeviceConformanceTest,
                         ::testing::Values(model_factory("runtime_like", runtime_like()),
                                           model_factory("vmm_like", vmm_like()),
                                           model_factory("vmm_like_host_backed", vmm_like_host_backed()),
                                           model_factory("runtime_like_512", runtime_like_fine_grained())),
                         device_factory_name);

}  // namespace
}  // namespace phasealloc::conformance
