// libphasealloc_c10.so's entry points: the Python package calls these through ctypes.
//
// phasealloc_c10_install() makes the bridge PyTorch's current CUDA allocator, as
// torch.cuda.memory.change_current_allocator does for a CUDAPluggableAllocator, and with the same
// rule: only before CUDA is initialised. phasealloc_c10_torch_version() is the torch version this
// library was compiled against: the class layout is that version's, so the package installs the
// bridge only into that version.
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <string>

#include <torch/csrc/cuda/CUDAPluggableAllocator.h>

#include "bridge_allocator.hpp"
#include "phasealloc_c_api.h"

#ifndef PHASEALLOC_TORCH_VERSION
#error "PHASEALLOC_TORCH_VERSION must name the torch version the bridge is compiled against"
#endif

namespace {
std::string g_install_error;
}

extern "C" {

__attribute__((visibility("default"))) const char* phasealloc_c10_torch_version(void) {
  return PHASEALLOC_TORCH_VERSION;
}

/// NULL once the bridge is the current allocator (or already was); else why not.
__attribute__((visibility("default"))) const char* phasealloc_c10_install(void) {
  namespace cca = c10::cuda::CUDACachingAllocator;
  using phasealloc::c10_bridge::bridge_allocator;
  try {
    cca::CUDAAllocator* current = cca::get();
    if (current == nullptr) {
      g_install_error = "PyTorch has no CUDA allocator to replace";
      return g_install_error.c_str();
    }
    if (current->name() == "phasealloc") return nullptr;
    if (current->initialized()) {
      g_install_error = "CUDA is already initialised in this process; the allocator can only be swapped before";
      return g_install_error.c_str();
    }
    // Never destroyed, like PyTorch's own allocator: tensors are freed during interpreter teardown,
    // after static destructors would have run.
    static auto* bridge = new std::shared_ptr<bridge_allocator>(std::make_shared<bridge_allocator>(current));
    phasealloc_set_event_listener(&bridge_allocator::on_engine_event, bridge->get());
    torch::cuda::CUDAPluggableAllocator::changeCurrentAllocator(*bridge);
    // The device-generic registry (torch.accelerator.memory_*, storages made through
    // c10::GetAllocator) must name the same allocator as the CUDA one.
    c10::SetAllocator(c10::DeviceType::CUDA, bridge->get(), std::numeric_limits<std::uint8_t>::max());
    return nullptr;
  } catch (const std::exception& e) {
    g_install_error = e.what();
  } catch (...) {
    g_install_error = "unknown exception";
  }
  return g_install_error.c_str();
}

}  // extern "C"
