// The registry of library objects (cuBLAS handles, cuBLASLt descriptors) and the report of a
// library call whose operands lie outside device memory.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "simcuda/core.hpp"

namespace simcuda {

namespace {

struct registry {
  std::mutex mu;
  std::unordered_map<const void*, object_kind> objects;
};

registry& the_registry() {
  static registry* r = new registry;  // never destroyed: stand-ins run during static teardown
  return *r;
}

}  // namespace

void register_object(const void* object, object_kind kind) noexcept {
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  r.objects[object] = kind;
}

bool is_object(const void* object, object_kind kind) noexcept {
  if (object == nullptr) return false;
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  auto it = r.objects.find(object);
  return it != r.objects.end() && it->second == kind;
}

bool unregister_object(const void* object, object_kind kind) noexcept {
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  auto it = r.objects.find(object);
  if (it == r.objects.end() || it->second != kind) return false;
  r.objects.erase(it);
  return true;
}

void illegal_operand(const char* library, const char* function, const char* operand, const void* pointer,
                     std::size_t bytes) noexcept {
  std::fprintf(stderr,
               "simcuda: %s: %s: operand %s [%p, +%zu bytes) is not accessible device memory "
               "(an illegal address on a GPU)\n",
               library, function, operand, pointer, bytes);
  std::fflush(stderr);
  if (current_config().strict) std::abort();
}

}  // namespace simcuda
