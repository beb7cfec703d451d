// Shared by the driver stand-in's files.
#pragma once

#include <cuda.h>

#include "simcuda/core.hpp"

namespace simcuda::drv {

inline constexpr const char* library = "libcuda.so.1";

CUresult from(mem_status status) noexcept;
CUresult not_supported(const char* function, const char* why) noexcept;

/// The primary context object of a device (one per device, never destroyed).
CUcontext primary_context(int device) noexcept;
/// The device of a context, or -1 when it is not one of ours.
int context_device(CUcontext context) noexcept;

}  // namespace simcuda::drv
