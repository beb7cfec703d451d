// Loud failures and counters: what the simulator cannot do is said, named and counted, never
// answered with a silent success.
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "simcuda/core.hpp"
#include "detail.hpp"

namespace simcuda {

namespace {

struct atomic_counters {
  std::atomic<std::uint64_t> kernel_launches{0}, library_calls{0}, memcpy_calls{0}, memcpy_bytes{0},
      memset_calls{0}, device_mallocs{0}, device_frees{0}, vmm_creates{0}, vmm_maps{0}, vmm_unmaps{0},
      unemulated_calls{0}, out_of_memory{0}, fat_binaries{0}, functions_registered{0},
      stream_waits{0};
};

atomic_counters& live() {
  static atomic_counters c;
  return c;
}

}  // namespace

namespace detail {
// Bumped by the other core files (declared there as extern functions).
void count_device_malloc() noexcept { live().device_mallocs.fetch_add(1, std::memory_order_relaxed); }
void count_device_free() noexcept { live().device_frees.fetch_add(1, std::memory_order_relaxed); }
void count_vmm_create() noexcept { live().vmm_creates.fetch_add(1, std::memory_order_relaxed); }
void count_vmm_map() noexcept { live().vmm_maps.fetch_add(1, std::memory_order_relaxed); }
void count_vmm_unmap() noexcept { live().vmm_unmaps.fetch_add(1, std::memory_order_relaxed); }
void count_out_of_memory() noexcept { live().out_of_memory.fetch_add(1, std::memory_order_relaxed); }
}  // namespace detail

void count_kernel_launch() noexcept { live().kernel_launches.fetch_add(1, std::memory_order_relaxed); }
void count_library_call() noexcept { live().library_calls.fetch_add(1, std::memory_order_relaxed); }
void count_memcpy(std::size_t bytes) noexcept {
  live().memcpy_calls.fetch_add(1, std::memory_order_relaxed);
  live().memcpy_bytes.fetch_add(bytes, std::memory_order_relaxed);
}
void count_memset() noexcept { live().memset_calls.fetch_add(1, std::memory_order_relaxed); }
void count_fat_binary() noexcept { live().fat_binaries.fetch_add(1, std::memory_order_relaxed); }
void count_function_registered() noexcept { live().functions_registered.fetch_add(1, std::memory_order_relaxed); }
void count_stream_wait() noexcept { live().stream_waits.fetch_add(1, std::memory_order_relaxed); }

counters read_counters() noexcept {
  const atomic_counters& c = live();
  counters out;
  out.kernel_launches = c.kernel_launches.load();
  out.library_calls = c.library_calls.load();
  out.memcpy_calls = c.memcpy_calls.load();
  out.memcpy_bytes = c.memcpy_bytes.load();
  out.memset_calls = c.memset_calls.load();
  out.device_mallocs = c.device_mallocs.load();
  out.device_frees = c.device_frees.load();
  out.vmm_creates = c.vmm_creates.load();
  out.vmm_maps = c.vmm_maps.load();
  out.vmm_unmaps = c.vmm_unmaps.load();
  out.unemulated_calls = c.unemulated_calls.load();
  out.out_of_memory = c.out_of_memory.load();
  out.fat_binaries = c.fat_binaries.load();
  out.functions_registered = c.functions_registered.load();
  out.stream_waits = c.stream_waits.load();
  return out;
}

int unemulated(const char* library, const char* function, int code) noexcept {
  live().unemulated_calls.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr,
               "simcuda: %s: %s is not emulated by the simulated GPU (returning error %d); "
               "see tools/simcuda/README.md\n",
               library, function, code);
  std::fflush(stderr);
  if (current_config().strict) std::abort();
  return code;
}

int unsupported(const char* library, const char* function, const char* why, int code) noexcept {
  live().unemulated_calls.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr, "simcuda: %s: %s: %s (returning error %d)\n", library, function, why, code);
  std::fflush(stderr);
  if (current_config().strict) std::abort();
  return code;
}

void fatal(const char* what) noexcept {
  std::fprintf(stderr, "simcuda: fatal: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

}  // namespace simcuda

extern "C" int simcuda_unemulated(const char* library, const char* function, int code) {
  return simcuda::unemulated(library, function, code);
}
