// Shared by the driver stand-in's files.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "simcuda/core.hpp"

namespace simcuda::drv {

inline constexpr const char* library = "libcuda.so.1";

CUresult from(mem_status status) noexcept;
CUresult not_supported(const char* function, const char* why) noexcept;
CUresult from(graph_status status) noexcept;

/// Whether a handle names the legacy default stream (0 or CU_STREAM_LEGACY).
inline bool legacy_handle(CUstream handle) noexcept {
  const auto raw = reinterpret_cast<std::uintptr_t>(handle);
  return raw == 0 || raw == 1;
}

/// Work queued on a stream: recorded into its capture (`*captured`), or to be run by the caller.
inline CUresult enqueue(stream* s, CUstream handle, const node_work& work, bool* captured) noexcept {
  return from(capture_work(s, legacy_handle(handle), work, captured));
}

/// The primary context object of a device (one per device, never destroyed).
CUcontext primary_context(int device) noexcept;
/// The device of a context, or -1 when it is not one of ours.
int context_device(CUcontext context) noexcept;

}  // namespace simcuda::drv
