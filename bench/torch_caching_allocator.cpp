// PyTorch's own CUDA caching allocator as a bench allocator (device_allocators.hpp).
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "device_allocators.hpp"

namespace phasealloc::bench {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;

const c10::CachingDeviceAllocator::DeviceStats stats() { return cca::getDeviceStats(0); }

std::uint64_t device_calls_of(const c10::CachingDeviceAllocator::DeviceStats& s) {
  // cudaMalloc + cudaFree; with expandable segments torch counts each map as a device alloc too.
  return static_cast<std::uint64_t>(s.num_device_alloc + s.num_device_free);
}

}  // namespace

std::unique_ptr<torch_caching_allocator> torch_caching_allocator::make(std::string& error) {
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    error = std::string("no CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return nullptr;
  }
  try {
    cca::CUDAAllocator* a = cca::get();
    if (a == nullptr) {
      error = "c10::cuda::CUDACachingAllocator::get() is null (libc10_cuda.so not initialised)";
      return nullptr;
    }
    if (!a->initialized()) a->init(count);  // what torch's CUDA lazy init does
  } catch (const c10::Error& e) {
    error = std::string("CUDACachingAllocator init: ") + e.what_without_backtrace();
    return nullptr;
  }
  std::unique_ptr<torch_caching_allocator> out(new torch_caching_allocator());
  out->clear();  // the process's allocator served earlier benchmarks: none of that counts here
  return out;
}

torch_caching_allocator::~torch_caching_allocator() { cca::emptyCache(); }

std::uintptr_t torch_caching_allocator::allocate(std::size_t bytes, stream_id stream, std::uint32_t /*tag*/) {
  try {
    return reinterpret_cast<std::uintptr_t>(
        cca::raw_alloc_with_stream(bytes, static_cast<cudaStream_t>(cuda_stream_for(stream))));
  } catch (const c10::Error& e) {
    note_failure(std::to_string(bytes) + " bytes: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    note_failure(std::to_string(bytes) + " bytes: " + e.what());
  }
  return 0;
}

void torch_caching_allocator::deallocate(std::uintptr_t addr, std::size_t /*bytes*/) {
  if (addr != 0) [[likely]] cca::raw_delete(reinterpret_cast<void*>(addr));
}

void torch_caching_allocator::record_stream(std::uintptr_t /*addr*/, stream_id /*stream*/) {
  note_failure("record_stream is not measured for PyTorch's allocator here: it needs the DataPtr raw_alloc "
               "does not make");
}

void torch_caching_allocator::reset() {
  const auto s = stats();
  folded_peak_reserved_ = std::max(folded_peak_reserved_, static_cast<std::size_t>(s.reserved_bytes[0].peak));
  folded_peak_allocated_ = std::max(folded_peak_allocated_, static_cast<std::size_t>(s.allocated_bytes[0].peak));
  clear();
}

void torch_caching_allocator::clear() {
  cca::emptyCache();
  cca::resetPeakStats(0);
}

void torch_caching_allocator::mark() { mark_calls_ = device_calls_of(stats()); }

std::uint64_t torch_caching_allocator::device_calls_since_mark() const { return device_calls_of(stats()) - mark_calls_; }

alloc_books torch_caching_allocator::books() const {
  const auto s = stats();
  alloc_books b;
  b.has_device = true;
  b.peak_reserved_bytes = std::max(folded_peak_reserved_, static_cast<std::size_t>(s.reserved_bytes[0].peak));
  b.peak_allocated_bytes = std::max(folded_peak_allocated_, static_cast<std::size_t>(s.allocated_bytes[0].peak));
  b.device_calls = device_calls_of(s);
  b.failures = failures_;
  b.first_failure = first_failure_;
  return b;
}

std::string torch_caching_allocator::label() const {
  return "PyTorch's CUDACachingAllocator (" + std::string(cca::get()->name()) + ", libc10_cuda.so) on the CUDA device";
}

void torch_caching_allocator::note_failure(std::string message) {
  if (failures_++ == 0) first_failure_ = std::move(message);
}

}  // namespace phasealloc::bench
