// cudaIpc*MemHandle on the simulated GPUs: a cudaMalloc allocation exported by its memfd run and
// mapped by another process through /proc/<pid>/fd (memory_books.hpp has the design note).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "memory_books.hpp"

namespace simcuda {

using namespace memory;

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

}  // namespace simcuda
