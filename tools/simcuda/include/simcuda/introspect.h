/* simcuda introspection: what the simulated GPU saw, for tests and tools (ctypes-friendly C).
 * Exported by libsimcuda.so, which every stand-in loads; a process sees one simulator. */
#ifndef SIMCUDA_INTROSPECT_H
#define SIMCUDA_INTROSPECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Process-wide counters; the field order is part of the ABI (append only). */
struct simcuda_counters {
  uint64_t kernel_launches;
  uint64_t library_calls;
  uint64_t memcpy_calls;
  uint64_t memcpy_bytes;
  uint64_t memset_calls;
  uint64_t device_mallocs;
  uint64_t device_frees;
  uint64_t vmm_creates;
  uint64_t vmm_maps;
  uint64_t vmm_unmaps;
  uint64_t unemulated_calls;
  uint64_t out_of_memory;
  uint64_t fat_binaries;
  uint64_t functions_registered;
  uint64_t stream_waits; /* cudaStreamWaitEvent / cuStreamWaitEvent outside a capture */
};

/* Fills *out (bytes: sizeof(struct simcuda_counters) as the caller knows it). 0 on success. */
int simcuda_get_counters(struct simcuda_counters* out, size_t bytes);
/* Device memory mapped now / at its peak (cudaMalloc allocations + cuMemCreate handles). */
size_t simcuda_mapped_bytes(int device);
size_t simcuda_peak_mapped_bytes(int device);
/* The peak of the mapped bytes since the previous call (since start for the first); the next
 * interval starts at the bytes mapped now. simcuda_peak_mapped_bytes is unaffected. */
size_t simcuda_take_interval_peak_mapped_bytes(int device);
/* NCCL's own buffers on a device (part of the mapped bytes, outside the framework's allocator):
 * now / at their peak. */
size_t simcuda_nccl_bytes(int device);
size_t simcuda_peak_nccl_bytes(int device);
/* Host memory behind host-located cuMemCreate handles (mapped at device addresses like device
 * memory, outside every device's capacity): now / at its peak since start. */
size_t simcuda_host_located_bytes(void);
size_t simcuda_peak_host_located_bytes(void);
/* Page-locked host memory (cudaHostAlloc / cuMemHostAlloc, rounded to 4 KiB pages) not yet freed. */
size_t simcuda_pinned_host_bytes(void);
/* Live cudaMalloc allocations of a device. */
size_t simcuda_live_allocations(int device);
/* The range `pointer` lies in: 1 device, 2 pinned host, 3 registered host, 0 unknown. */
int simcuda_pointer_range(const void* pointer, void** base, size_t* bytes, int* device);
/* The capacity of each simulated GPU, and how many there are. */
size_t simcuda_capacity_bytes(void);
int simcuda_device_count(void);
/* The value level of SIMCUDA_GPU (values:LEVEL, or the default): "off", "observable" or "exact". */
const char* simcuda_value_level(void);
/* 1 where SIMCUDA_GPU has quiet:1 (no start-up lines, simcuda's or its Python side's), else 0. */
int simcuda_quiet(void);
/* 1 where SIMCUDA_GPU has nccl_peers:virtual (this process is one rank; its peers are absent), else 0. */
int simcuda_nccl_virtual_peers(void);

#ifdef __cplusplus
}
#endif

#endif /* SIMCUDA_INTROSPECT_H */
