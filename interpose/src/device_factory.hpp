// Builds the device of one GPU ordinal from the configuration, and the host memory its offload
// buffers come from.
//
// Design note
// Rationale: the default is cuda_vmm (page-granular release) where the driver supports
//   virtual memory management, else cudaMalloc segments. The model device serves tests and tools.
// Approach: device:auto tries cuda_vmm, then cuda_runtime, and on failure reports both reasons.
//   A build without the CUDA devices (no CUDA toolkit: PHASEALLOC_HAVE_CUDA_DEVICES undefined)
//   can only build model devices and says so for the others.
//   Host memory matches the device: the model device's process gets model_host_memory (real heap
//   bytes, not page-locked), CUDA devices get cuda_host_memory (cudaHostAlloc, portable).
// Limitations: the model device hands out fake addresses: PyTorch kernels writing to them fault.
//   It is for tests and tools that never dereference what they allocate.
#pragma once

#include <memory>
#include <string>

#include "interpose_config.hpp"
#include "phasealloc/device.hpp"
#include "phasealloc/host_memory.hpp"
#include "phasealloc/status.hpp"

namespace phasealloc::interpose {

/// The device for GPU `ordinal` (any ordinal for the model device), or why there is none.
result<std::unique_ptr<device>, std::string> make_device(const interpose_config& config, int ordinal);

/// The host memory for the offload buffers of a device that make_device built from `config`.
result<std::unique_ptr<host_memory>, std::string> make_host_memory(const interpose_config& config);

}  // namespace phasealloc::interpose
