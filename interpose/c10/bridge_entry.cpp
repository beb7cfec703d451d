// libphasealloc_c10.so's entry points: the Python package calls these through ctypes.
//
// phasealloc_c10_install() makes the bridge PyTorch's current CUDA allocator, as
// torch.cuda.memory.change_current_allocator does for a CUDAPluggableAllocator, and with the same
// rule: only before CUDA is initialised. phasealloc_c10_build_identity() is the torch this library
// was compiled against (version, git commit, CUDA major, C++ ABI): the class layout is that build's,
// so install() refuses any other torch, named by the caller, and checks the CUDA runtime itself.
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <string>

#include <torch/csrc/cuda/CUDAPluggableAllocator.h>

#include "bridge_allocator.hpp"
#include "phasealloc_c_api.h"
#include "runtime_settings.hpp"

#include <cuda_runtime_api.h>

#ifndef PHASEALLOC_TORCH_VERSION
#error "PHASEALLOC_TORCH_VERSION must name the torch version the bridge is compiled against"
#endif

namespace {
std::string g_install_error;

// "version=2.15.0+cu132;git=<commit>;cuda=13;abi=1": the torch build this library needs.
const std::string& build_identity() {
  static const std::string identity = std::string("version=") + PHASEALLOC_TORCH_VERSION +
                                      ";git=" + PHASEALLOC_TORCH_GIT_VERSION + ";cuda=" + PHASEALLOC_TORCH_CUDA_MAJOR +
                                      ";abi=" + std::to_string(_GLIBCXX_USE_CXX11_ABI);
  return identity;
}

/// Why the CUDA runtime this process loaded is not the major version the bridge was built for ("" if it is).
std::string cuda_runtime_mismatch() {
  const std::string built_for = PHASEALLOC_TORCH_CUDA_MAJOR;
  if (built_for.empty()) return {};
  int version = 0;
  if (cudaRuntimeGetVersion(&version) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  const std::string running = std::to_string(version / 1000);
  if (running == built_for) return {};
  return "the c10 bridge was built for CUDA " + built_for + ", this process's CUDA runtime is " + running;
}
}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* phasealloc_c10_build_identity(void) {
  return build_identity().c_str();
}

/// NULL once the bridge is the current allocator (or already was); else why not. `running_identity`
/// names the running torch in build_identity()'s form; another build than this library's is refused.
__attribute__((visibility("default"))) const char* phasealloc_c10_install(const char* running_identity) {
  namespace cca = c10::cuda::CUDACachingAllocator;
  using phasealloc::c10_bridge::bridge_allocator;
  try {
    if (running_identity == nullptr || build_identity() != running_identity) {
      g_install_error = std::string("the c10 bridge was built for torch ") + build_identity() + ", this is torch " +
                        (running_identity != nullptr ? running_identity : "(not named)");
      return g_install_error.c_str();
    }
    if (std::string why = cuda_runtime_mismatch(); !why.empty()) {
      g_install_error = std::move(why);
      return g_install_error.c_str();
    }
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
    phasealloc::c10_bridge::follow_runtime_settings();
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
