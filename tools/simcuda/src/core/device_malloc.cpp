// cudaMalloc / cudaFree and memsets on the simulated GPUs (memory_books.hpp has the design note).
#include <fcntl.h>
#include <sys/mman.h>

#include <cstring>

#include "detail.hpp"
#include "memory_books.hpp"

namespace simcuda {

using namespace memory;

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

}  // namespace simcuda
