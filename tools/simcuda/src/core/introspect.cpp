// The C introspection API (include/simcuda/introspect.h) over the core's books.
#include "simcuda/introspect.h"

#include <cstring>

#include "simcuda/core.hpp"

extern "C" {

int simcuda_get_counters(struct simcuda_counters* out, size_t bytes) {
  if (out == nullptr) return -1;
  const simcuda::counters c = simcuda::read_counters();
  const simcuda_counters full{c.kernel_launches, c.library_calls,  c.memcpy_calls,     c.memcpy_bytes,
                              c.memset_calls,    c.device_mallocs, c.device_frees,     c.vmm_creates,
                              c.vmm_maps,        c.vmm_unmaps,     c.unemulated_calls, c.out_of_memory,
                              c.fat_binaries,    c.functions_registered, c.stream_waits};
  std::memcpy(out, &full, bytes < sizeof full ? bytes : sizeof full);
  return 0;
}

size_t simcuda_mapped_bytes(int device) { return simcuda::mapped_bytes(device); }
size_t simcuda_peak_mapped_bytes(int device) { return simcuda::peak_mapped_bytes(device); }
size_t simcuda_take_interval_peak_mapped_bytes(int device) {
  return simcuda::take_interval_peak_mapped_bytes(device);
}
size_t simcuda_nccl_bytes(int device) { return simcuda::nccl_bytes(device); }
size_t simcuda_peak_nccl_bytes(int device) { return simcuda::peak_nccl_bytes(device); }
size_t simcuda_live_allocations(int device) { return simcuda::live_allocations(device); }
size_t simcuda_host_located_bytes(void) { return simcuda::host_located_bytes(); }
size_t simcuda_peak_host_located_bytes(void) { return simcuda::peak_host_located_bytes(); }
size_t simcuda_pinned_host_bytes(void) { return simcuda::pinned_host_bytes(); }

int simcuda_pointer_range(const void* pointer, void** base, size_t* bytes, int* device) {
  const simcuda::pointer_info info = simcuda::find_pointer(pointer);
  if (base) *base = info.base;
  if (bytes) *bytes = info.bytes;
  if (device) *device = info.device;
  switch (info.kind) {
    case simcuda::pointer_kind::device: return 1;
    case simcuda::pointer_kind::host_pinned: return 2;
    case simcuda::pointer_kind::host_registered: return 3;
    case simcuda::pointer_kind::unknown: return 0;
  }
  return 0;
}

size_t simcuda_capacity_bytes(void) { return simcuda::current_config().gpu.memory_bytes; }
int simcuda_device_count(void) { return simcuda::device_count(); }
const char* simcuda_value_level(void) { return simcuda::value_level_name(simcuda::current_config().values); }
int simcuda_quiet(void) { return simcuda::current_config().quiet ? 1 : 0; }
int simcuda_nccl_virtual_peers(void) { return simcuda::current_config().nccl_virtual_peers ? 1 : 0; }

}  // extern "C"
