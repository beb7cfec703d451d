// Device memory of the simulated GPUs.
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
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "detail.hpp"
#include "range_allocator.hpp"
#include "simcuda/core.hpp"

namespace simcuda {

namespace {

constexpr std::size_t page_bytes = std::size_t{2} << 20;

std::size_t round_up(std::size_t bytes, std::size_t unit) { return (bytes + unit - 1) / unit * unit; }

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

books& the_books() {
  static books* b = new books;  // never destroyed: stand-ins are called during static teardown
  return *b;
}

/// Arenas for the fault reporter: read without the lock from a signal handler.
struct arena_bounds {
  std::uintptr_t begin = 0, end = 0;
};
arena_bounds g_arenas[16];

device_state& device_locked(books& b, int device) {
  if (b.devices.empty()) b.devices.resize(static_cast<std::size_t>(device_count()));
  auto& slot = b.devices.at(static_cast<std::size_t>(device));
  if (slot) return *slot;
  const std::size_t capacity = current_config().gpu.memory_bytes;
  auto d = std::make_unique<device_state>();
  d->ordinal = device;
  // 8 TiB each, within the 128 TiB of a process's user space for up to 16 GPUs (6 TiB then).
  const std::size_t address_space = device_count() <= 8 ? std::size_t{8} << 40 : std::size_t{6} << 40;
  d->arena_bytes = round_up(std::max(capacity * 4, address_space), page_bytes);
  void* arena = mmap(nullptr, d->arena_bytes + page_bytes, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (arena == MAP_FAILED) fatal("cannot reserve the address range of a simulated GPU (mmap PROT_NONE)");
  // 2 MiB alignment, like device allocations on a GPU.
  auto base = round_up(reinterpret_cast<std::uintptr_t>(arena), page_bytes);
  d->arena = reinterpret_cast<char*>(base);
  d->va = detail::range_allocator(d->arena_bytes);
  std::string name = "simcuda-gpu" + std::to_string(device);
  d->memfd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (d->memfd < 0) fatal("memfd_create failed for a simulated GPU's memory");
  const std::size_t phys_bytes = capacity * 2;
  if (ftruncate(d->memfd, static_cast<off_t>(phys_bytes)) != 0) fatal("ftruncate of a simulated GPU's memfd failed");
  d->phys = detail::range_allocator(phys_bytes);
  g_arenas[device] = {base, base + d->arena_bytes};
  install_fault_reporter();
  mark_device_active(device);
  slot = std::move(d);
  return *slot;
}

/// The device whose arena holds `p`, or nullptr.
device_state* device_of_locked(books& b, const void* p) {
  auto a = reinterpret_cast<std::uintptr_t>(p);
  for (auto& d : b.devices) {
    if (!d) continue;
    auto base = reinterpret_cast<std::uintptr_t>(d->arena);
    if (a >= base && a < base + d->arena_bytes) return d.get();
  }
  return nullptr;
}

bool map_fd(void* address, std::size_t bytes, int fd, std::size_t offset, bool accessible) {
  int prot = accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
  void* got = mmap(address, bytes, prot, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(offset));
  return got == address;
}

void map_reserved(void* address, std::size_t bytes) {
  void* got = mmap(address, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (got != address) fatal("cannot return device pages to the reserved state (mmap MAP_FIXED)");
}

void punch(int fd, std::size_t offset, std::size_t bytes) {
  // Returns the RAM; the offsets stay valid (zero on next use, like fresh device memory).
  fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(bytes));
}

bool charge_locked(device_state& d, std::size_t bytes) {
  if (d.mapped + bytes > current_config().gpu.memory_bytes) {
    detail::count_out_of_memory();
    return false;
  }
  d.mapped += bytes;
  d.peak = std::max(d.peak, d.mapped);
  d.interval_peak = std::max(d.interval_peak, d.mapped);
  return true;
}

void free_handle_memory_locked(books& b, std::uint64_t id) {
  auto it = b.handles.find(id);
  handle_record& h = it->second;
  if (h.own_fd) {
    close(h.fd);
  } else {
    device_state& d = device_locked(b, h.device);
    punch(d.memfd, h.phys_offset, h.bytes);
    d.phys.give(h.phys_offset, h.bytes);
  }
  if (h.host_located) b.host_located -= h.bytes;
  else if (h.counted) device_locked(b, h.device).mapped -= h.bytes;
  b.handles.erase(it);
}

}  // namespace

const char* to_string(mem_status status) noexcept {
  switch (status) {
    case mem_status::ok: return "ok";
    case mem_status::out_of_memory: return "out of memory";
    case mem_status::invalid_value: return "invalid value";
    case mem_status::invalid_pointer: return "invalid pointer";
    case mem_status::in_use: return "in use";
  }
  return "?";
}

namespace {

/// The device's state if it has been set up; a query does not set one up (that maps its arena).
const device_state* existing_locked(const books& b, int device) {
  const auto i = static_cast<std::size_t>(device);
  return i < b.devices.size() ? b.devices[i].get() : nullptr;
}

}  // namespace

std::size_t mapped_bytes(int device) noexcept {
  if (!valid_device(device)) return 0;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  const device_state* d = existing_locked(b, device);
  return d != nullptr ? d->mapped : 0;
}

std::size_t peak_mapped_bytes(int device) noexcept {
  if (!valid_device(device)) return 0;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  const device_state* d = existing_locked(b, device);
  return d != nullptr ? d->peak : 0;
}

std::size_t take_interval_peak_mapped_bytes(int device) noexcept {
  if (!valid_device(device)) return 0;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state& d = device_locked(b, device);
  const std::size_t peak = std::max(d.interval_peak, d.mapped);
  d.interval_peak = d.mapped;
  return peak;
}

std::size_t live_allocations(int device) noexcept {
  if (!valid_device(device)) return 0;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  return device_locked(b, device).allocations.size();
}

mem_status device_malloc(int device, std::size_t bytes, void** out) noexcept {
  if (!valid_device(device) || out == nullptr) return mem_status::invalid_value;
  *out = nullptr;
  if (bytes == 0) return mem_status::ok;  // cudaMalloc(0) succeeds with a null pointer
  if (bytes > (std::size_t{1} << 50)) return mem_status::out_of_memory;
  const std::size_t rounded = round_up(bytes, page_bytes);
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state& d = device_locked(b, device);
  if (!charge_locked(d, rounded)) return mem_status::out_of_memory;
  // Top-down like the driver: a new allocation sits below the older ones (PyTorch's allocator
  // breaks ties between equal free blocks by address, so the order changes its decisions).
  auto va = d.va.take_top(rounded, page_bytes);
  auto phys = d.phys.take(rounded, page_bytes);
  if (!va || !phys) fatal("simulated GPU address or offset space exhausted below its capacity");
  char* address = d.arena + *va;
  if (!map_fd(address, rounded, d.memfd, *phys, true)) fatal("mmap of simulated device memory failed");
  if (auto fill = current_config().fill_byte) std::memset(address, *fill, rounded);
  d.allocations[reinterpret_cast<std::uintptr_t>(address)] = {rounded, *phys};
  detail::count_device_malloc();
  *out = address;
  return mem_status::ok;
}

mem_status device_free(void* pointer) noexcept {
  if (pointer == nullptr) return mem_status::ok;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state* d = device_of_locked(b, pointer);
  if (d == nullptr) return mem_status::invalid_pointer;
  auto it = d->allocations.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == d->allocations.end()) return mem_status::invalid_pointer;
  const allocation a = it->second;
  d->allocations.erase(it);
  map_reserved(pointer, a.bytes);
  punch(d->memfd, a.phys_offset, a.bytes);
  d->phys.give(a.phys_offset, a.bytes);
  d->va.give(static_cast<std::size_t>(static_cast<char*>(pointer) - d->arena), a.bytes);
  d->mapped -= a.bytes;
  detail::count_device_free();
  return mem_status::ok;
}

mem_status vmm_create(int device, std::size_t bytes, bool shareable, std::uint64_t* handle) noexcept {
  if (!valid_device(device) || handle == nullptr || bytes == 0 || bytes % page_bytes != 0)
    return mem_status::invalid_value;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state& d = device_locked(b, device);
  if (!charge_locked(d, bytes)) return mem_status::out_of_memory;
  handle_record h;
  h.device = device;
  h.bytes = bytes;
  if (shareable) {
    h.fd = memfd_create("simcuda-handle", MFD_CLOEXEC);
    if (h.fd < 0 || ftruncate(h.fd, static_cast<off_t>(bytes)) != 0) fatal("memfd for a shareable handle failed");
    h.own_fd = true;
  } else {
    auto phys = d.phys.take(bytes, page_bytes);
    if (!phys) fatal("simulated GPU offset space exhausted below its capacity");
    h.fd = d.memfd;
    h.phys_offset = *phys;
  }
  const std::uint64_t id = b.next_handle++;
  b.handles[id] = h;
  detail::count_vmm_create();
  *handle = id;
  return mem_status::ok;
}

mem_status vmm_create_host(std::size_t bytes, std::uint64_t* handle) noexcept {
  if (handle == nullptr || bytes == 0 || bytes % page_bytes != 0) return mem_status::invalid_value;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  handle_record h;
  h.device = current_device();  // only for the books: the memory is the host's
  h.bytes = bytes;
  h.fd = memfd_create("simcuda-host-located", MFD_CLOEXEC);
  if (h.fd < 0 || ftruncate(h.fd, static_cast<off_t>(bytes)) != 0) fatal("memfd for a host-located handle failed");
  h.own_fd = true;
  h.counted = false;
  h.host_located = true;
  b.host_located += bytes;
  b.peak_host_located = std::max(b.peak_host_located, b.host_located);
  const std::uint64_t id = b.next_handle++;
  b.handles[id] = h;
  detail::count_vmm_create();
  *handle = id;
  return mem_status::ok;
}

std::size_t host_located_bytes() noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  return b.host_located;
}

std::size_t peak_host_located_bytes() noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  return b.peak_host_located;
}

bool vmm_handle_host_located(std::uint64_t handle) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto h = b.handles.find(handle);
  return h != b.handles.end() && h->second.host_located;
}

mem_status vmm_release(std::uint64_t handle) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto it = b.handles.find(handle);
  if (it == b.handles.end() || it->second.released) return mem_status::invalid_pointer;
  if (it->second.maps > 0) {
    it->second.released = true;  // CUDA frees it at the last unmap
    return mem_status::ok;
  }
  free_handle_memory_locked(b, handle);
  return mem_status::ok;
}

mem_status vmm_reserve(std::size_t bytes, std::size_t alignment, void* hint, void** out) noexcept {
  if (out == nullptr || bytes == 0 || bytes % page_bytes != 0) return mem_status::invalid_value;
  if (alignment == 0) alignment = page_bytes;
  if (alignment % page_bytes != 0) return mem_status::invalid_value;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  // Reservations are not tied to a device in CUDA; ours live in the current device's arena, so
  // a pointer still names the GPU whose memory is mapped there in the common case.
  device_state& d = device_locked(b, current_device());
  std::optional<std::size_t> offset;
  auto h = reinterpret_cast<std::uintptr_t>(hint);
  auto base = reinterpret_cast<std::uintptr_t>(d.arena);
  if (hint && h >= base && h % alignment == 0 && d.va.take_at(h - base, bytes)) offset = h - base;
  if (!offset) offset = d.va.take_top(bytes, alignment);  // top-down, as cudaMalloc (device_malloc)
  if (!offset) return mem_status::out_of_memory;
  d.reservations[base + *offset] = bytes;
  *out = d.arena + *offset;
  return mem_status::ok;
}

mem_status vmm_address_free(void* pointer, std::size_t bytes) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state* d = device_of_locked(b, pointer);
  if (d == nullptr) return mem_status::invalid_pointer;
  auto a = reinterpret_cast<std::uintptr_t>(pointer);
  auto it = d->reservations.find(a);
  if (it == d->reservations.end() || it->second != bytes) return mem_status::invalid_pointer;
  auto m = d->mappings.lower_bound(a);
  if (m != d->mappings.end() && m->first < a + bytes) return mem_status::in_use;
  d->reservations.erase(it);
  d->va.give(static_cast<std::size_t>(a - reinterpret_cast<std::uintptr_t>(d->arena)), bytes);
  return mem_status::ok;
}

namespace {
bool inside_reservation_locked(const device_state& d, std::uintptr_t a, std::size_t bytes) {
  auto it = d.reservations.upper_bound(a);
  if (it == d.reservations.begin()) return false;
  --it;
  return a + bytes <= it->first + it->second;
}
}  // namespace

mem_status vmm_map(void* address, std::size_t bytes, std::size_t offset, std::uint64_t handle) noexcept {
  if (bytes == 0 || bytes % page_bytes != 0 || offset % page_bytes != 0) return mem_status::invalid_value;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto h = b.handles.find(handle);
  if (h == b.handles.end() || h->second.released) return mem_status::invalid_pointer;
  if (offset + bytes > h->second.bytes) return mem_status::invalid_value;
  device_state* d = device_of_locked(b, address);
  auto a = reinterpret_cast<std::uintptr_t>(address);
  if (d == nullptr || a % page_bytes != 0 || !inside_reservation_locked(*d, a, bytes)) return mem_status::invalid_pointer;
  auto next = d->mappings.lower_bound(a);
  if (next != d->mappings.end() && next->first < a + bytes) return mem_status::in_use;
  if (next != d->mappings.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.bytes > a) return mem_status::in_use;
  }
  if (!map_fd(address, bytes, h->second.fd, h->second.phys_offset + offset, false))
    fatal("mmap of a cuMem handle failed");
  d->mappings[a] = {bytes, handle, offset, false};
  ++h->second.maps;
  detail::count_vmm_map();
  return mem_status::ok;
}

mem_status vmm_unmap(void* address, std::size_t bytes) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state* d = device_of_locked(b, address);
  if (d == nullptr) return mem_status::invalid_pointer;
  auto a = reinterpret_cast<std::uintptr_t>(address);
  // CUDA requires the range to cover whole mappings exactly; check before touching anything.
  std::vector<std::map<std::uintptr_t, mapping>::iterator> covered;
  std::uintptr_t cursor = a;
  for (auto it = d->mappings.find(a); it != d->mappings.end() && cursor < a + bytes; ++it) {
    if (it->first != cursor) break;
    covered.push_back(it);
    cursor += it->second.bytes;
  }
  if (covered.empty() || cursor != a + bytes) return mem_status::invalid_pointer;
  map_reserved(address, bytes);
  for (auto it : covered) {
    const std::uint64_t id = it->second.handle;
    d->mappings.erase(it);
    auto h = b.handles.find(id);
    if (h == b.handles.end()) fatal("a mapping names a handle that is gone");
    if (--h->second.maps == 0 && h->second.released) free_handle_memory_locked(b, id);
    detail::count_vmm_unmap();
  }
  return mem_status::ok;
}

mem_status vmm_set_access(void* address, std::size_t bytes) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state* d = device_of_locked(b, address);
  if (d == nullptr) return mem_status::invalid_pointer;
  auto a = reinterpret_cast<std::uintptr_t>(address);
  std::vector<mapping*> covered;
  std::uintptr_t cursor = a;
  auto it = d->mappings.upper_bound(a);
  if (it == d->mappings.begin()) return mem_status::invalid_pointer;
  --it;
  for (; it != d->mappings.end() && cursor < a + bytes; ++it) {
    if (it->first > cursor || it->first + it->second.bytes <= cursor) break;
    covered.push_back(&it->second);
    cursor = it->first + it->second.bytes;
  }
  if (cursor < a + bytes) return mem_status::invalid_pointer;  // an unmapped hole in the range
  if (mprotect(address, bytes, PROT_READ | PROT_WRITE) != 0) return mem_status::invalid_value;
  for (mapping* m : covered) m->accessible = true;  // access is per mapping: see Limitations
  return mem_status::ok;
}

bool vmm_handle_info(std::uint64_t handle, int* device, std::size_t* bytes) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto h = b.handles.find(handle);
  if (h == b.handles.end() || h->second.released) return false;
  if (device) *device = h->second.device;
  if (bytes) *bytes = h->second.bytes;
  return true;
}

bool vmm_handle_at(const void* address, std::uint64_t* handle) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state* d = device_of_locked(b, address);
  if (d == nullptr) return false;
  auto a = reinterpret_cast<std::uintptr_t>(address);
  auto it = d->mappings.upper_bound(a);
  if (it == d->mappings.begin()) return false;
  --it;
  if (a >= it->first + it->second.bytes) return false;
  if (handle) *handle = it->second.handle;
  return true;
}

mem_status vmm_export_fd(std::uint64_t handle, int* fd) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto h = b.handles.find(handle);
  if (h == b.handles.end() || fd == nullptr) return mem_status::invalid_pointer;
  if (!h->second.own_fd) return mem_status::invalid_value;  // not created shareable
  *fd = fcntl(h->second.fd, F_DUPFD_CLOEXEC, 0);
  return *fd >= 0 ? mem_status::ok : mem_status::invalid_value;
}

mem_status vmm_import_fd(int fd, std::uint64_t* handle) noexcept {
  struct stat st {};
  if (handle == nullptr || fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size % page_bytes != 0)
    return mem_status::invalid_value;
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return mem_status::invalid_value;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  handle_record h;
  h.device = current_device();
  h.bytes = static_cast<std::size_t>(st.st_size);
  h.fd = own;
  h.own_fd = true;
  h.counted = false;
  const std::uint64_t id = b.next_handle++;
  b.handles[id] = h;
  *handle = id;
  return mem_status::ok;
}

pointer_info find_pointer(const void* pointer) noexcept {
  pointer_info info;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto a = reinterpret_cast<std::uintptr_t>(pointer);
  if (device_state* d = device_of_locked(b, pointer)) {
    info.device = d->ordinal;
    auto al = d->allocations.upper_bound(a);
    if (al != d->allocations.begin()) {
      --al;
      if (a < al->first + al->second.bytes) {
        info.kind = pointer_kind::device;
        info.base = reinterpret_cast<void*>(al->first);
        info.bytes = al->second.bytes;
        return info;
      }
    }
    auto m = d->mappings.upper_bound(a);
    if (m != d->mappings.begin()) {
      --m;
      if (a < m->first + m->second.bytes) {
        info.kind = pointer_kind::device;
        info.base = reinterpret_cast<void*>(m->first);
        info.bytes = m->second.bytes;
        return info;
      }
    }
    auto o = d->ipc_opened.upper_bound(a);
    if (o != d->ipc_opened.begin()) {
      --o;
      if (a < o->first + o->second) {
        info.kind = pointer_kind::device;
        info.base = reinterpret_cast<void*>(o->first);
        info.bytes = o->second;
        return info;
      }
    }
    info.device = -1;
    return info;
  }
  auto h = b.host.upper_bound(a);
  if (h != b.host.begin()) {
    --h;
    if (a < h->first + h->second.bytes) {
      info.kind = h->second.owned ? pointer_kind::host_pinned : pointer_kind::host_registered;
      info.base = reinterpret_cast<void*>(h->first);
      info.bytes = h->second.bytes;
    }
  }
  return info;
}

bool device_range_accessible(const void* pointer, std::size_t bytes) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state* d = device_of_locked(b, pointer);
  if (d == nullptr) return false;
  auto a = reinterpret_cast<std::uintptr_t>(pointer);
  if (bytes == 0) bytes = 1;
  auto al = d->allocations.upper_bound(a);
  if (al != d->allocations.begin()) {
    --al;
    if (a < al->first + al->second.bytes) return a + bytes <= al->first + al->second.bytes;
  }
  auto o = d->ipc_opened.upper_bound(a);
  if (o != d->ipc_opened.begin()) {
    --o;
    if (a < o->first + o->second) return a + bytes <= o->first + o->second;
  }
  // Mapped pages: a run of adjacent accessible mappings may cover the range (expandable segments).
  auto m = d->mappings.upper_bound(a);
  if (m == d->mappings.begin()) return false;
  --m;
  std::uintptr_t cursor = a;
  for (; m != d->mappings.end(); ++m) {
    if (m->first > cursor || m->first + m->second.bytes <= cursor || !m->second.accessible) return false;
    cursor = m->first + m->second.bytes;
    if (cursor >= a + bytes) return true;
  }
  return false;
}

void device_memset(void* pointer, int value, std::size_t bytes) noexcept {
  constexpr std::size_t host_page = 4096;
  auto begin = reinterpret_cast<std::uintptr_t>(pointer);
  auto end = begin + bytes;
  auto first = round_up(begin, host_page);
  auto last = end / host_page * host_page;
  if ((value & 0xff) != 0 || last <= first) {
    std::memset(pointer, value, bytes);
    return;
  }
  // The whole pages [first, last) map runs of physical memory: one allocation, or a chain of
  // adjacent mappings (an expandable segment's pages, each its own handle). Punching the runs out
  // zeroes them without touching a page; untouched pages stay free.
  struct run {
    int fd;
    std::size_t offset;
    std::size_t bytes;
  };
  std::vector<run> runs;
  {
    books& b = the_books();
    std::lock_guard lock(b.mu);
    device_state* d = device_of_locked(b, pointer);
    if (d != nullptr) {
      auto al = d->allocations.upper_bound(first);
      if (al != d->allocations.begin() && first < std::prev(al)->first + std::prev(al)->second.bytes &&
          last <= std::prev(al)->first + std::prev(al)->second.bytes) {
        --al;
        runs.push_back({d->memfd, al->second.phys_offset + (first - al->first), last - first});
      } else {
        auto m = d->mappings.upper_bound(first);
        if (m != d->mappings.begin()) --m;
        for (std::uintptr_t cursor = first; cursor < last; ++m) {
          if (m == d->mappings.end() || m->first > cursor || m->first + m->second.bytes <= cursor) {
            runs.clear();  // a hole in the range: not all mapped memory
            break;
          }
          auto h = b.handles.find(m->second.handle);
          if (h == b.handles.end()) {
            runs.clear();
            break;
          }
          const std::uintptr_t piece_end = std::min<std::uintptr_t>(last, m->first + m->second.bytes);
          runs.push_back({h->second.fd, h->second.phys_offset + m->second.handle_offset + (cursor - m->first),
                          piece_end - cursor});
          cursor = piece_end;
        }
      }
    }
  }
  bool punched = !runs.empty();
  for (const run& r : runs) {
    punched = punched && fallocate(r.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(r.offset),
                                   static_cast<off_t>(r.bytes)) == 0;
  }
  if (!punched) {
    std::memset(pointer, value, bytes);  // not device memory we know, or the kernel refused: write it
    return;
  }
  std::memset(pointer, 0, first - begin);
  std::memset(reinterpret_cast<void*>(last), 0, end - last);
}

mem_status host_alloc(std::size_t bytes, void** out) noexcept {
  if (out == nullptr) return mem_status::invalid_value;
  *out = nullptr;
  if (bytes == 0) return mem_status::ok;
  const std::size_t rounded = round_up(bytes, 4096);
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return mem_status::out_of_memory;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  b.host[reinterpret_cast<std::uintptr_t>(p)] = {rounded, true};
  *out = p;
  return mem_status::ok;
}

mem_status host_free(void* pointer) noexcept {
  if (pointer == nullptr) return mem_status::ok;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto it = b.host.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == b.host.end() || !it->second.owned) return mem_status::invalid_pointer;
  munmap(pointer, it->second.bytes);
  b.host.erase(it);
  return mem_status::ok;
}

std::size_t pinned_host_bytes() noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  std::size_t bytes = 0;
  for (const auto& [base, range] : b.host) {
    if (range.owned) bytes += range.bytes;
  }
  return bytes;
}

mem_status host_register(void* pointer, std::size_t bytes) noexcept {
  if (pointer == nullptr || bytes == 0) return mem_status::invalid_value;
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto a = reinterpret_cast<std::uintptr_t>(pointer);
  auto next = b.host.lower_bound(a);
  if (next != b.host.end() && next->first < a + bytes) return mem_status::in_use;
  if (next != b.host.begin() && std::prev(next)->first + std::prev(next)->second.bytes > a) return mem_status::in_use;
  b.host[a] = {bytes, false};
  return mem_status::ok;
}

mem_status host_unregister(void* pointer) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  auto it = b.host.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == b.host.end() || it->second.owned) return mem_status::invalid_pointer;
  b.host.erase(it);
  return mem_status::ok;
}

constexpr std::uint32_t ipc_magic = 0x53494d43;  // "SIMC"

mem_status ipc_export(const void* base, ipc_descriptor* out) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state* d = device_of_locked(b, base);
  if (d == nullptr || out == nullptr) return mem_status::invalid_pointer;
  auto it = d->allocations.find(reinterpret_cast<std::uintptr_t>(base));
  if (it == d->allocations.end()) return mem_status::invalid_pointer;
  *out = {};
  out->magic = ipc_magic;
  out->pid = static_cast<std::int32_t>(getpid());
  out->fd = d->memfd;
  out->device = d->ordinal;
  out->offset = it->second.phys_offset;
  out->bytes = it->second.bytes;
  return mem_status::ok;
}

mem_status ipc_open(const ipc_descriptor& desc, void** out) noexcept {
  if (desc.magic != ipc_magic || out == nullptr || !valid_device(desc.device)) return mem_status::invalid_value;
  std::string path = "/proc/" + std::to_string(desc.pid) + "/fd/" + std::to_string(desc.fd);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return mem_status::invalid_value;  // the exporter is gone, or not ours to open
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state& d = device_locked(b, desc.device);
  auto va = d.va.take(desc.bytes, page_bytes);
  if (!va) {
    close(fd);
    return mem_status::out_of_memory;
  }
  char* address = d.arena + *va;
  bool mapped = map_fd(address, desc.bytes, fd, desc.offset, true);
  close(fd);  // the mapping keeps the memory
  if (!mapped) {
    d.va.give(*va, desc.bytes);
    return mem_status::invalid_value;
  }
  d.ipc_opened[reinterpret_cast<std::uintptr_t>(address)] = desc.bytes;
  *out = address;
  return mem_status::ok;
}

mem_status ipc_close(void* pointer) noexcept {
  books& b = the_books();
  std::lock_guard lock(b.mu);
  device_state* d = device_of_locked(b, pointer);
  if (d == nullptr) return mem_status::invalid_pointer;
  auto it = d->ipc_opened.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == d->ipc_opened.end()) return mem_status::invalid_pointer;
  map_reserved(pointer, it->second);
  d->va.give(static_cast<std::size_t>(static_cast<char*>(pointer) - d->arena), it->second);
  d->ipc_opened.erase(it);
  return mem_status::ok;
}

namespace detail {
bool fault_in_arena(std::uintptr_t address, int* device) noexcept {
  for (int i = 0; i < 16; ++i) {
    if (g_arenas[i].end != 0 && address >= g_arenas[i].begin && address < g_arenas[i].end) {
      *device = i;
      return true;
    }
  }
  return false;
}
}  // namespace detail

}  // namespace simcuda
