// Device memory of the simulated GPUs (src/core/memory_books.hpp has the design note).
// Part of simcuda's core API (core.hpp gathers it, with the glossary).
#pragma once

#include "simcuda/devices.hpp"

namespace simcuda {

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

enum class mem_status {
  ok,
  out_of_memory,     ///< over the capacity
  invalid_value,     ///< size 0 where not allowed, misaligned, bad flags
  invalid_pointer,   ///< not the base of a live allocation / handle / reservation
  in_use,            ///< e.g. releasing a reservation that still has mappings
};

const char* to_string(mem_status status) noexcept;

/// Bytes of device memory currently mapped (allocations + cuMem handles) on `device`.
std::size_t mapped_bytes(int device) noexcept;
/// Peak of mapped_bytes(device) since start.
std::size_t peak_mapped_bytes(int device) noexcept;
/// Peak of mapped_bytes(device) since the previous call (since start for the first), and starts the
/// next interval at the bytes mapped now; peak_mapped_bytes is unaffected. Measures per-phase peaks.
std::size_t take_interval_peak_mapped_bytes(int device) noexcept;
/// Live cudaMalloc allocations of `device`.
std::size_t live_allocations(int device) noexcept;

/// NCCL's own buffers on `device` (the nccl stand-in's connections, outside any framework's
/// allocator; they are also in mapped_bytes): the stand-in counts what it takes and gives back.
void count_nccl_taken(int device, std::size_t bytes) noexcept;
void count_nccl_returned(int device, std::size_t bytes) noexcept;
/// Bytes NCCL's buffers hold on `device` now / at their peak since start.
std::size_t nccl_bytes(int device) noexcept;
std::size_t peak_nccl_bytes(int device) noexcept;

/// SIMCUDA_BOOKS: writes this process's books file now (books_file.cpp; nothing when the variable
/// is unset). Called at exit and whenever NCCL's peak grows on a device.
void write_books_file();

/// cudaMalloc: `bytes` rounded up to 2 MiB of physical memory (the real driver's granularity
/// for large allocations; small ones share nothing here, so they pay a page each).
mem_status device_malloc(int device, std::size_t bytes, void** out) noexcept;
/// cudaFree: the pointer must be the base of a live device_malloc. The range becomes PROT_NONE
/// again and its pages go back to the host.
mem_status device_free(void* pointer) noexcept;

/// cuMem* physical handles (CUmemGenericAllocationHandle values are opaque ids).
/// `shareable`: the handle can be exported as a POSIX fd (its own memfd).
mem_status vmm_create(int device, std::size_t bytes, bool shareable, std::uint64_t* handle) noexcept;
/// A host-located handle (cuMemCreate with CU_MEM_LOCATION_TYPE_HOST*): host RAM (its own memfd)
/// that maps into the device's address space like device memory; not charged to any device's
/// capacity, counted in host_located_bytes().
mem_status vmm_create_host(std::size_t bytes, std::uint64_t* handle) noexcept;
/// Bytes of live host-located handles in this process, now / at their peak since start.
std::size_t host_located_bytes() noexcept;
std::size_t peak_host_located_bytes() noexcept;
/// Whether a live handle is host-located.
bool vmm_handle_host_located(std::uint64_t handle) noexcept;
mem_status vmm_release(std::uint64_t handle) noexcept;
mem_status vmm_reserve(std::size_t bytes, std::size_t alignment, void* hint, void** out) noexcept;
mem_status vmm_address_free(void* base, std::size_t bytes) noexcept;
mem_status vmm_map(void* address, std::size_t bytes, std::size_t offset, std::uint64_t handle) noexcept;
mem_status vmm_unmap(void* address, std::size_t bytes) noexcept;
/// cuMemSetAccess: makes mapped pages readable and writable (until then they fault).
mem_status vmm_set_access(void* address, std::size_t bytes) noexcept;
/// Size and device of a live handle.
bool vmm_handle_info(std::uint64_t handle, int* device, std::size_t* bytes) noexcept;
/// cuMemRetainAllocationHandle: the handle mapped at `address`.
bool vmm_handle_at(const void* address, std::uint64_t* handle) noexcept;
/// POSIX-fd export of a shareable handle (cuMemExportToShareableHandle): a dup of its memfd.
mem_status vmm_export_fd(std::uint64_t handle, int* fd) noexcept;
/// cuMemImportFromShareableHandle: a handle over another process's memfd (not counted against
/// this process's capacity: it is the exporter's memory).
mem_status vmm_import_fd(int fd, std::uint64_t* handle) noexcept;

/// cudaIpcGetMemHandle / cudaIpcOpenMemHandle for cudaMalloc memory. The descriptor fits in a
/// cudaIpcMemHandle_t (64 bytes); the opener maps the exporter's memfd through /proc/<pid>/fd.
struct ipc_descriptor {
  std::uint32_t magic = 0;
  std::int32_t pid = 0;
  std::int32_t fd = -1;
  std::int32_t device = 0;
  std::uint64_t offset = 0;  ///< of the allocation in the exporter's device memfd
  std::uint64_t bytes = 0;
};
static_assert(sizeof(ipc_descriptor) <= 64);
mem_status ipc_export(const void* base, ipc_descriptor* out) noexcept;
mem_status ipc_open(const ipc_descriptor& descriptor, void** out) noexcept;
mem_status ipc_close(void* pointer) noexcept;

enum class pointer_kind { unknown, device, host_pinned, host_registered };

struct pointer_info {
  pointer_kind kind = pointer_kind::unknown;
  int device = -1;
  void* base = nullptr;       ///< start of the allocation / mapping / host range
  std::size_t bytes = 0;      ///< its length
};

/// What `pointer` points into. Device pointers are looked up by arena, then by allocation or
/// mapping; host ranges are those cudaHostAlloc / cudaHostRegister created.
pointer_info find_pointer(const void* pointer) noexcept;

/// True when [pointer, pointer + bytes) lies inside one live, accessible device range (an
/// allocation, or mapped pages with access set). Used to check copies and GEMM operands before
/// touching memory, so a bad pointer is an error value, not a fault.
bool device_range_accessible(const void* pointer, std::size_t bytes) noexcept;

/// Whether a copy from `src` to `dst` moves its bytes. Every copy does but one between two device
/// ranges at values:off: there no kernel computes, and a device-to-device copy is work of the same
/// kind (torch's copy_ of contiguous tensors is one); skipping it keeps the level's promise that
/// the job's device memory costs no host memory. Copies from or to the host always move.
bool copy_moves_bytes(void* dst, const void* src) noexcept;
/// Whether one side of a copy is valid: accessible memory in a device arena (device pages, or
/// host-located pages mapped there), or anything outside the arenas (host memory, pageable or
/// pinned, which the caller vouches for as CUDA does); `must_be_device` / `must_be_host` as the
/// copy's kind says.
bool copy_side_ok(const void* pointer, std::size_t bytes, bool must_be_device, bool must_be_host) noexcept;

/// memset of accessible device memory (the caller checked the range). A zero fill over whole
/// host pages punches them out of the backing memfd instead of writing them: they read as zero
/// and cost no RAM, so zero-initialised optimizer states of a dry run stay free.
void device_memset(void* pointer, int value, std::size_t bytes) noexcept;

/// Pinned host memory (cudaHostAlloc / cudaMallocHost) and registration of existing host memory.
mem_status host_alloc(std::size_t bytes, void** out) noexcept;
mem_status host_free(void* pointer) noexcept;
/// Bytes of page-locked host memory host_alloc made and host_free has not freed.
std::size_t pinned_host_bytes() noexcept;
mem_status host_register(void* pointer, std::size_t bytes) noexcept;
mem_status host_unregister(void* pointer) noexcept;

/// Installs (once) the SIGSEGV/SIGBUS handler that names a fault inside a device arena
/// ("illegal address: ... freed/unmapped device memory of GPU n") before the default action.
void install_fault_reporter() noexcept;

}  // namespace simcuda
