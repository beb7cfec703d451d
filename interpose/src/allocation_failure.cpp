#include "allocation_failure.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <stdexcept>

namespace phasealloc::interpose {
namespace {

using throw_fn = void (*)(const char*);

constexpr const char* companion_name = "libphasealloc_torch_oom.so";
constexpr const char* companion_symbol = "phasealloc_throw_torch_oom";

/// The companion's thrower, or nullptr. Looked up once; a companion that exists but fails to load
/// is reported once on stderr (a torch process that should have had it).
throw_fn companion_thrower() {
  static throw_fn fn = [] () -> throw_fn {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&companion_thrower), &info) == 0 || info.dli_fname == nullptr) {
      return nullptr;
    }
    const std::filesystem::path path = std::filesystem::path(info.dli_fname).parent_path() / companion_name;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return nullptr;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      std::fprintf(stderr, "phasealloc: %s did not load (%s); out-of-memory errors are raised as RuntimeError\n",
                   path.c_str(), why != nullptr ? why : "unknown reason");
      return nullptr;
    }
    return reinterpret_cast<throw_fn>(dlsym(handle, companion_symbol));
  }();
  return fn;
}

}  // namespace

void throw_out_of_memory(const std::string& message) {
  if (throw_fn fn = companion_thrower()) fn(message.c_str());  // throws c10::OutOfMemoryError
  throw std::runtime_error(message);
}

void throw_allocation_failure(const std::string& message) { throw std::runtime_error(message); }

}  // namespace phasealloc::interpose
