#include "c_api_support.hpp"

#include "engine_registry.hpp"
#include "interpose_config.hpp"
#include "phasealloc/check.hpp"

namespace phasealloc::interpose {

std::string check_device(int device, bool allow_all) {
  if (allow_all && device == -1) return {};
  if (device < 0 || device >= engine_registry::max_devices) {
    return fmt::format("device {} is out of range (0..{}{})", device, engine_registry::max_devices - 1,
                       allow_all ? ", or -1 for all" : "");
  }
  return {};
}

std::vector<device_slot*> slots_for(int device) {
  engine_registry& registry = engine_registry::instance();
  if (device == -1) return registry.created();
  if (device_slot* s = registry.existing(device)) return {s};
  return {};
}

void report_interpose_misuse(const std::string& message) noexcept {
  engine_registry::instance().count_misuse();
  const auto& config = process_config();
  if (config && config.value().strict) {
    detail::report_fatal("no misuse (strict mode)", __FILE__, __LINE__, message);
  }
  report_error(message);
}

}  // namespace phasealloc::interpose
