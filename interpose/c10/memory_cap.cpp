#include "memory_cap.hpp"

#include <algorithm>

#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include "books.hpp"
#include "phasealloc_c_api.h"

namespace phasealloc::c10_bridge {
namespace {

std::size_t index_of(c10::DeviceIndex device) {
  TORCH_CHECK(device >= 0 && device < memory_cap::max_devices, "phasealloc: device ", static_cast<int>(device),
              " is beyond the ", memory_cap::max_devices, " GPUs phasealloc handles");
  return static_cast<std::size_t>(device);
}

std::size_t native_reserved_bytes(c10::cuda::CUDACachingAllocator::CUDAAllocator* native,
                                  c10::DeviceIndex device) {
  if (!native->initialized()) return 0;
  return static_cast<std::size_t>(std::max<int64_t>(native->getDeviceStats(device).reserved_bytes[0].current, 0));
}

}  // namespace

memory_cap::memory_cap(c10::cuda::CUDACachingAllocator::CUDAAllocator* native) : native_(native) {
  for (auto& f : fraction_) f.store(1.0, std::memory_order_relaxed);
  for (auto& s : stale_) s.store(false, std::memory_order_relaxed);
}

void memory_cap::set(c10::DeviceIndex device, double fraction) {
  const std::size_t i = index_of(device);
  fraction_[i].store(fraction, std::memory_order_relaxed);
  stale_[i].store(true, std::memory_order_release);
  if (native_->initialized()) {
    if (fraction >= 1.0) {
      native_->setMemoryFraction(1.0, device);
    } else {
      before_native(device);
    }
  }
}

void memory_cap::set_all(double fraction) {
  for (int d = 0; d < max_devices; ++d) {
    fraction_[static_cast<std::size_t>(d)].store(fraction, std::memory_order_relaxed);
    stale_[static_cast<std::size_t>(d)].store(fraction < 1.0, std::memory_order_release);
  }
}

double memory_cap::fraction(c10::DeviceIndex device) const {
  return fraction_[index_of(device)].load(std::memory_order_relaxed);
}

std::size_t memory_cap::cap_bytes(c10::DeviceIndex device, std::size_t* total_bytes) const {
  std::size_t free_bytes = 0, total = 0;
  {
    c10::cuda::CUDAGuard guard(device);
    C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  }
  *total_bytes = total;
  return static_cast<std::size_t>(fraction(device) * static_cast<double>(total));
}

void memory_cap::refresh_engine(c10::DeviceIndex device) {
  const std::size_t i = index_of(device);
  stale_[i].store(false, std::memory_order_release);
  std::size_t limit = 0;  // no limit
  if (fraction(device) < 1.0) {
    std::size_t total = 0;
    const std::size_t cap = cap_bytes(device, &total);
    const std::size_t native = native_reserved_bytes(native_, device);
    limit = std::max<std::size_t>(cap > native ? cap - native : 0, 1);  // 1: nothing fits
  }
  TORCH_CHECK(phasealloc_set_limit_bytes(device, limit) == 0, "phasealloc: ", phasealloc_last_error());
}

void memory_cap::before_native(c10::DeviceIndex device) {
  if (fraction(device) >= 1.0) return;
  std::size_t total = 0;
  const std::size_t cap = cap_bytes(device, &total);
  const auto ours = static_cast<std::size_t>(std::max<int64_t>(engine_stats(device).reserved_bytes[0].current, 0));
  const std::size_t left = cap > ours ? cap - ours : 0;
  native_->setMemoryFraction(total > 0 ? static_cast<double>(left) / static_cast<double>(total) : 0.0, device);
}

void memory_cap::after_native(c10::DeviceIndex device) {
  if (fraction(device) < 1.0 || stale(device)) refresh_engine(device);
}

}  // namespace phasealloc::c10_bridge
