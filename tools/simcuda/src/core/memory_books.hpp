// The books of the simulated GPUs' memory, shared by the files that change them (memory_books.cpp:
// set-up, queries, lookup; device_malloc.cpp: cudaMalloc and memsets; device_vmm.cpp: cuMem*;
// pinned_host.cpp: page-locked host memory; ipc_memory.cpp: cudaIpc*). Private to simcuda's core.
//
// Note [simulated device memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Rationale
//   An allocator under test must see a GPU that behaves like one where it matters: a capacity that
//   runs out, addresses that stay put, and memory that faults once it is freed or unmapped (a real
//   GPU raises an illegal-address error; an allocator that hands out freed pages must be caught).
//   A dry run of an 80 GiB job must also fit on a 24 GiB machine, so untouched memory costs nothing.
//
// Approach
//   - Each device reserves one arena of virtual addresses, PROT_NONE and MAP_NORESERVE: any device
//     pointer lies in its device's arena. It is terabytes, like a GPU's address space, because
//     allocators reserve far more than the capacity (PyTorch's expandable segments and phasealloc's
//     cuda_vmm reserve ~1.1x the capacity per pool and stream); unmapped addresses cost nothing.
//   - Its physical memory is one memfd (2x the capacity, sparse): a cudaMalloc or a cuMemCreate
//     takes a run of 2 MiB pages of memfd offsets. Mapping maps that run MAP_SHARED at an arena
//     address, so the bytes are real and survive remapping (a cuMem handle mapped twice shows the
//     same bytes at both addresses, as on a GPU). Pages cost RAM only once written.
//   - Freeing or unmapping maps PROT_NONE anonymous memory back over the range (the address stays
//     reserved and faults on access), and punches the physical run out of the memfd, so the host
//     gets the RAM back.
//   - Capacity is counted in mapped bytes (cudaMalloc allocations + cuMemCreate handles), the
//     figure cudaMemGetInfo subtracts. Address and offset space are larger than the capacity, so
//     fragmentation of those spaces never refuses what the capacity allows.
//   - Handles asked for as shareable (POSIX fd) get their own memfd so that another process can
//     map them from the exported fd.
//
// Limitations
//   - Allocations are rounded to 2 MiB pages; the real driver packs small cudaMalloc calls tighter.
//   - Access flags are per mapping, all-or-nothing read/write; peers are not modelled (every
//     device's memory is reachable from the host, so peer copies just work).
//   - One mutex guards all books: fine for an allocator under test, not a fast path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "range_allocator.hpp"
#include "simcuda/core.hpp"

namespace simcuda::memory {

inline constexpr std::size_t page_bytes = std::size_t{2} << 20;

inline std::size_t round_up(std::size_t bytes, std::size_t unit) { return (bytes + unit - 1) / unit * unit; }

struct allocation {
  std::size_t bytes = 0;        ///< rounded to pages
  std::size_t phys_offset = 0;  ///< in the device memfd
};

struct mapping {
  std::size_t bytes = 0;
  std::uint64_t handle = 0;
  std::size_t handle_offset = 0;
  bool accessible = false;
};

struct handle_record {
  int device = 0;
  std::size_t bytes = 0;
  int fd = -1;                  ///< the device memfd, or its own (shareable / imported)
  bool own_fd = false;
  std::size_t phys_offset = 0;  ///< in `fd`
  bool counted = true;          ///< imported handles are another process's memory
  bool host_located = false;    ///< cuMemCreate with a host location: host RAM, not the device's
  int maps = 0;
  bool released = false;        ///< cuMemRelease'd while still mapped: freed at the last unmap
};

struct device_state {
  int ordinal = 0;
  char* arena = nullptr;
  std::size_t arena_bytes = 0;
  int memfd = -1;
  detail::range_allocator va{0};
  detail::range_allocator phys{0};
  std::size_t mapped = 0;
  std::size_t peak = 0;
  std::size_t interval_peak = 0;  ///< peak since the last take_interval_peak_mapped_bytes
  std::map<std::uintptr_t, allocation> allocations;   ///< cudaMalloc base -> allocation
  std::map<std::uintptr_t, std::size_t> reservations; ///< cuMemAddressReserve base -> bytes
  std::map<std::uintptr_t, std::size_t> ipc_opened;   ///< cudaIpcOpenMemHandle base -> bytes
  std::map<std::uintptr_t, mapping> mappings;         ///< cuMemMap address -> mapping
};

struct host_range {
  std::size_t bytes = 0;
  bool owned = false;  ///< cudaHostAlloc'd (we munmap it) rather than registered
};

struct books {
  std::mutex mu;
  std::size_t host_located = 0;  ///< bytes of live host-located handles
  std::size_t peak_host_located = 0;
  std::vector<std::unique_ptr<device_state>> devices;
  std::unordered_map<std::uint64_t, handle_record> handles;
  std::uint64_t next_handle = 1;
  std::map<std::uintptr_t, host_range> host;
};

/// The books of every device, never destroyed (stand-ins are called during static teardown).
books& the_books();

/// The device's state under b.mu, set up (its arena reserved, its memfd made) on first use.
device_state& device_locked(books& b, int device);
/// The device's state if it has been set up; a query does not set one up (that maps its arena).
const device_state* existing_locked(const books& b, int device);
/// The device whose arena holds `p`, or nullptr.
device_state* device_of_locked(books& b, const void* p);

/// Maps `bytes` of `fd` at `offset` over `address` (MAP_FIXED), accessible or PROT_NONE.
bool map_fd(void* address, std::size_t bytes, int fd, std::size_t offset, bool accessible);
/// Puts PROT_NONE anonymous memory back over a range: reserved, faulting on access.
void map_reserved(void* address, std::size_t bytes);
/// Returns a physical run's RAM to the host (the offsets stay valid, zero on next use).
void punch(int fd, std::size_t offset, std::size_t bytes);
/// Counts `bytes` more mapped on the device, or refuses (counted out of memory) past its capacity.
bool charge_locked(device_state& d, std::size_t bytes);
/// Frees a handle's memory and forgets it (its last mapping gone and released).
void free_handle_memory_locked(books& b, std::uint64_t id);
/// Whether [a, a+bytes) lies inside one of the device's cuMemAddressReserve ranges.
bool inside_reservation_locked(const device_state& d, std::uintptr_t a, std::size_t bytes);

}  // namespace simcuda::memory
