// The VMM API of the simulated GPUs: handles (device- or host-located, shareable by fd), address
// reservations, mappings and access (memory_books.hpp has the design note).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "detail.hpp"
#include "memory_books.hpp"

namespace simcuda {

using namespace memory;

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

}  // namespace simcuda
