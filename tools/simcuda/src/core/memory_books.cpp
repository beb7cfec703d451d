// The simulated GPUs' memory books: set-up of a device's arena and memfd, the helpers that change
// mappings, the queries (mapped bytes, peaks, pointer lookup) and the fault reporter's arenas.
// memory_books.hpp has the design note.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "detail.hpp"
#include "memory_books.hpp"

namespace simcuda {

namespace {

/// Arenas for the fault reporter: read without the lock from a signal handler.
struct arena_bounds {
  std::uintptr_t begin = 0, end = 0;
};
arena_bounds g_arenas[16];

}  // namespace

namespace memory {

books& the_books() {
  static books* b = new books;  // never destroyed: stand-ins are called during static teardown
  return *b;
}

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

const device_state* existing_locked(const books& b, int device) {
  const auto i = static_cast<std::size_t>(device);
  return i < b.devices.size() ? b.devices[i].get() : nullptr;
}

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

bool inside_reservation_locked(const device_state& d, std::uintptr_t a, std::size_t bytes) {
  auto it = d.reservations.upper_bound(a);
  if (it == d.reservations.begin()) return false;
  --it;
  return a + bytes <= it->first + it->second;
}

}  // namespace memory

using namespace memory;

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
