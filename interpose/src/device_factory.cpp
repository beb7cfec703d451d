#include "device_factory.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "phasealloc/devices/model_device.hpp"
#include "phasealloc/devices/model_host_memory.hpp"
#if defined(PHASEALLOC_HAVE_CUDA_DEVICES)
#include "phasealloc/devices/cuda_host_memory.hpp"
#include "phasealloc/devices/cuda_runtime_device.hpp"
#include "phasealloc/devices/cuda_vmm_device.hpp"
#endif

namespace phasealloc::interpose {
namespace {

#if defined(PHASEALLOC_HAVE_CUDA_DEVICES)
result<std::unique_ptr<device>, std::string> make_vmm(const interpose_config& config, int ordinal) {
  std::string why;
  cuda_vmm_options options;
  options.page_bytes = config.vmm_page_bytes;
  // Host memory kept for the next offload counts against the same budget as the memory in use.
  if (config.offload_host_budget_bytes != 0) {
    options.host_cache_bytes = std::min(options.host_cache_bytes, config.offload_host_budget_bytes);
  }
  auto d = cuda_vmm_device::create(ordinal, options, &why);
  if (!d) return fmt::format("cuda_vmm on GPU {}: {} ({})", ordinal, why, to_string(d.error()));
  return std::unique_ptr<device>(std::move(d).value());
}

result<std::unique_ptr<device>, std::string> make_runtime(int ordinal) {
  std::string why;
  auto d = cuda_runtime_device::create(ordinal, &why);
  if (!d) return fmt::format("cuda_runtime on GPU {}: {} ({})", ordinal, why, to_string(d.error()));
  return std::unique_ptr<device>(std::move(d).value());
}
#endif

}  // namespace

result<std::unique_ptr<device>, std::string> make_device(const interpose_config& config, int ordinal) {
  if (config.device == device_kind::model) {
    model_device_config device_config;
    device_config.capacity_bytes = config.model_capacity_bytes;
    device_config.virtual_memory = config.model_virtual_memory;
    // Each simulated GPU gets its own window of fake address space, as real GPUs of a process do.
    device_config.address_base = model_address_base + static_cast<device_address>(ordinal) * model_address_window_bytes;
    return std::unique_ptr<device>(std::make_unique<model_device>(device_config));
  }
#if defined(PHASEALLOC_HAVE_CUDA_DEVICES)
  switch (config.device) {
    case device_kind::cuda_vmm: return make_vmm(config, ordinal);
    case device_kind::cuda_runtime: return make_runtime(ordinal);
    default: break;
  }
  auto vmm = make_vmm(config, ordinal);
  if (vmm) return vmm;
  auto runtime = make_runtime(ordinal);
  if (runtime) return runtime;
  return fmt::format("no usable device (device:auto): {}; {}", vmm.error(), runtime.error());
#else
  return fmt::format("device:{} needs the CUDA devices, but this build of phasealloc has none (built without the "
                     "CUDA toolkit); use device:model for tests and tools",
                     to_string(config.device));
#endif
}

result<std::unique_ptr<host_memory>, std::string> make_host_memory(const interpose_config& config) {
  if (config.device == device_kind::model) return std::unique_ptr<host_memory>(std::make_unique<model_host_memory>());
#if defined(PHASEALLOC_HAVE_CUDA_DEVICES)
  return std::unique_ptr<host_memory>(std::make_unique<cuda_host_memory>());
#else
  return fmt::format("device:{} needs cudaHostAlloc for its host buffers, but this build of phasealloc has no CUDA "
                     "devices (built without the CUDA toolkit); use device:model for tests and tools",
                     to_string(config.device));
#endif
}

}  // namespace phasealloc::interpose
