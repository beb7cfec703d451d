// Small CUDA runtime helpers shared by the two CUDA devices. Private to allocator/devices.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include <fmt/format.h>

#include "phasealloc/status.hpp"

namespace phasealloc::detail {

/// "cudaErrorNoDevice (no CUDA-capable device is detected)".
inline std::string describe_cuda_error(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorName(e), cudaGetErrorString(e));
}

/// Says whether device `ordinal` can be used, with the reason in `why` when not. Clears the
/// runtime's last error on every failure.
inline errc probe_cuda_device(int ordinal, std::string* why) noexcept {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) {
      *why = fmt::format("no CUDA device: cudaGetDeviceCount returned {}{}", describe_cuda_error(e),
                         e == cudaErrorInsufficientDriver ? "; no driver (libcuda.so.1) or one older than the runtime" : "");
    }
    return errc::not_supported;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device: cudaGetDeviceCount found 0 devices";
    return errc::not_supported;
  }
  if (ordinal < 0 || ordinal >= count) {
    if (why) *why = fmt::format("CUDA device ordinal {} out of range: cudaGetDeviceCount found {}", ordinal, count);
    return errc::invalid_argument;
  }
  return errc::ok;
}

/// Makes `ordinal` the calling thread's current device for a scope and restores the previous one
/// (c10's CUDAGuard): the caller's thread (a PyTorch worker) must not see its device change.
class runtime_device_guard {
 public:
  explicit runtime_device_guard(int ordinal) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ == ordinal) return;
    ok_ = cudaSetDevice(ordinal) == cudaSuccess;
    if (!ok_) (void)cudaGetLastError();
    restore_ = ok_ && previous_ >= 0;
  }
  ~runtime_device_guard() {
    if (restore_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  runtime_device_guard(const runtime_device_guard&) = delete;
  runtime_device_guard& operator=(const runtime_device_guard&) = delete;

  /// false when the device could not be made current (later calls will fail and say why).
  bool ok() const noexcept { return ok_; }

 private:
  int previous_ = -1;
  bool ok_ = true;
  bool restore_ = false;
};

}  // namespace phasealloc::detail
