// Shared by the runtime stand-in's files: the last-error slot and status translation.
#pragma once

#include <cuda_runtime_api.h>

#include "simcuda/core.hpp"

namespace simcuda::rt {

inline constexpr const char* library = "libcudart.so.13";

/// Records `status` as the calling thread's last error (unless success) and returns it.
cudaError_t result(cudaError_t status) noexcept;

/// cudaErrorNotSupported with one line naming the function and the reason (loud).
cudaError_t not_supported(const char* function, const char* why) noexcept;

cudaError_t from(mem_status status) noexcept;

/// The stream a handle names, or nullptr (then the caller answers cudaErrorInvalidResourceHandle).
inline stream* stream_of(cudaStream_t handle) noexcept { return resolve_stream(handle); }

}  // namespace simcuda::rt
