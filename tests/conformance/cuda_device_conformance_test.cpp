// The device conformance suite on a real GPU: cuda_runtime and cuda_vmm on device 0.
// Without a GPU or a driver every test skips and says why (label: gpu).
#include <memory>
#include <string>

#include "device_conformance.hpp"
#include "phasealloc/devices/cuda_runtime_device.hpp"
#include "phasealloc/devices/cuda_vmm_device.hpp"

namespace phasealloc::conformance {
namespace {

constexpr int test_ordinal = 0;

made_device make_cuda_runtime() {
  std::string why;
  auto made = cuda_runtime_device::create(test_ordinal, &why);
  if (!made) return {nullptr, why};
  return {std::move(made).value(), {}};
}

made_device make_cuda_vmm() {
  std::string why;
  auto made = cuda_vmm_device::create(test_ordinal, {}, &why);
  if (!made) return {nullptr, why};
  return {std::move(made).value(), {}};
}

INSTANTIATE_TEST_SUITE_P(Cuda, DeviceConformanceTest,
                         ::testing::Values(device_factory{"cuda_runtime", make_cuda_runtime, false},
                                           device_factory{"cuda_vmm", make_cuda_vmm, false}),
                         device_factory_name);

}  // namespace
}  // namespace phasealloc::conformance
