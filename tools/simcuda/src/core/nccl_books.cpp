// NCCL's own device memory per device: the nccl stand-in's buffers, counted apart from the rest
// of the mapped bytes so that tools can show them as their own line (they are outside any
// framework's allocator, so its traces do not hold them).
#include <array>
#include <atomic>

#include "simcuda/core.hpp"

namespace simcuda {

namespace {

constexpr int max_devices = 16;  // SIMCUDA_GPU count's bound

struct nccl_device_books {
  std::atomic<std::size_t> held{0};
  std::atomic<std::size_t> peak{0};
};

std::array<nccl_device_books, max_devices>& nccl_books() {
  static auto* b = new std::array<nccl_device_books, max_devices>;  // never destroyed: read at exit
  return *b;
}

bool in_range(int device) noexcept { return device >= 0 && device < max_devices; }

}  // namespace

void count_nccl_taken(int device, std::size_t bytes) noexcept {
  if (!in_range(device)) fatal("count_nccl_taken: device ordinal out of range (callers check first)");
  nccl_device_books& b = nccl_books()[static_cast<std::size_t>(device)];
  const std::size_t now = b.held.fetch_add(bytes) + bytes;
  std::size_t peak = b.peak.load();
  while (now > peak && !b.peak.compare_exchange_weak(peak, now)) {
  }
  if (now > peak) {  // a new peak: on disk before the process can be killed
    try {
      write_books_file();
    } catch (...) {  // out of host memory: the exit handler tries again
    }
  }
}

void count_nccl_returned(int device, std::size_t bytes) noexcept {
  if (!in_range(device)) fatal("count_nccl_returned: device ordinal out of range (callers check first)");
  nccl_device_books& b = nccl_books()[static_cast<std::size_t>(device)];
  if (b.held.fetch_sub(bytes) < bytes) fatal("count_nccl_returned: more NCCL bytes returned than taken");
}

std::size_t nccl_bytes(int device) noexcept {
  return in_range(device) ? nccl_books()[static_cast<std::size_t>(device)].held.load() : 0;
}

std::size_t peak_nccl_bytes(int device) noexcept {
  return in_range(device) ? nccl_books()[static_cast<std::size_t>(device)].peak.load() : 0;
}

}  // namespace simcuda
