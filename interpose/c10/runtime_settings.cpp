#include "runtime_settings.hpp"

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <c10/core/AllocatorConfig.h>
#include <c10/util/Exception.h>

#include "phasealloc_c_api.h"

namespace phasealloc::c10_bridge {

using config = c10::CachingAllocator::AcceleratorAllocatorConfig;

void hand_divisions_to_phasealloc() {
  const std::vector<std::size_t>& divisions = config::roundup_power2_divisions();
  TORCH_CHECK(phasealloc_set_request_divisions(divisions.data(), divisions.size()) == 0, "phasealloc: ",
              phasealloc_last_error());
}

void follow_runtime_settings() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::function<void(const std::string&)>& hook = config::getConfigParserHook();
    hook = [device_parser = std::move(hook)](const std::string& settings) {
      try {
        if (device_parser) device_parser(settings);  // CUDA's keys; throws on a bad one, as before
      } catch (...) {
        hand_divisions_to_phasealloc();  // the common keys, divisions among them, were taken already
        throw;
      }
      hand_divisions_to_phasealloc();
    };
  });
}

}  // namespace phasealloc::c10_bridge

/// Hands PyTorch's division table to phasealloc again. The package calls it after settings PyTorch
/// refused: its parser resets the divisions before it checks the keys, and the hook never runs
/// then. NULL, or why the table could not be handed over.
extern "C" __attribute__((visibility("default"))) const char* phasealloc_c10_follow_allocator_settings() {
  static thread_local std::string error;
  try {
    phasealloc::c10_bridge::hand_divisions_to_phasealloc();
    return nullptr;
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  return error.c_str();
}
