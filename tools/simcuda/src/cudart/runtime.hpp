// Shared by the runtime stand-in's files: the last-error slot and status translation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "simcuda/core.hpp"

namespace simcuda::rt {

inline constexpr const char* library = "libcudart.so.13";

/// Records `status` as the calling thread's last error (unless success) and returns it.
cudaError_t result(cudaError_t status) noexcept;

/// cudaErrorNotSupported with one line naming the function and the reason (loud).
cudaError_t not_supported(const char* function, const char* why) noexcept;

cudaError_t from(mem_status status) noexcept;

cudaError_t from(graph_status status) noexcept;

/// Whether a handle names the legacy default stream (0 or cudaStreamLegacy): its use while a
/// blocking stream captures is an implicit dependency on the capture.
inline bool legacy_handle(cudaStream_t handle) noexcept {
  const auto raw = reinterpret_cast<std::uintptr_t>(handle);
  return raw == 0 || raw == 1;
}

/// Work queued on a stream handle: recorded into its capture (`*captured`), or to be run by the
/// caller; an error value when the capture refuses it.
inline cudaError_t enqueue(stream* s, cudaStream_t handle, const node_work& work, bool* captured) noexcept {
  return result(from(capture_work(s, legacy_handle(handle), work, captured)));
}

/// The stream a handle names, or nullptr (then the caller answers cudaErrorInvalidResourceHandle).
inline stream* stream_of(cudaStream_t handle) noexcept { return resolve_stream(handle); }

}  // namespace simcuda::rt
