// Page-locked host memory: cudaHostAlloc'd (owned) and cudaHostRegister'd ranges, in the books so
// that pointer lookup and copies know them.
#include <sys/mman.h>

#include "memory_books.hpp"

namespace simcuda {

using namespace memory;

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

}  // namespace simcuda
