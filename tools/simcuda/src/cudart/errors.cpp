// Error names and strings, and the per-thread last-error slot of the runtime API.
#include <cstdio>

#include "runtime.hpp"

namespace simcuda::rt {

namespace {
thread_local cudaError_t t_last_error = cudaSuccess;
}

cudaError_t result(cudaError_t status) noexcept {
  if (status != cudaSuccess) t_last_error = status;
  return status;
}

cudaError_t not_supported(const char* function, const char* why) noexcept {
  unsupported(library, function, why, cudaErrorNotSupported);
  return result(cudaErrorNotSupported);
}

cudaError_t from(graph_status status) noexcept {
  switch (status) {
    case graph_status::ok: return cudaSuccess;
    case graph_status::unsupported: return cudaErrorStreamCaptureUnsupported;
    case graph_status::invalidated: return cudaErrorStreamCaptureInvalidated;
    case graph_status::merge: return cudaErrorStreamCaptureMerge;
    case graph_status::unmatched: return cudaErrorStreamCaptureUnmatched;
    case graph_status::unjoined: return cudaErrorStreamCaptureUnjoined;
    case graph_status::isolation: return cudaErrorStreamCaptureIsolation;
    case graph_status::implicit: return cudaErrorStreamCaptureImplicit;
    case graph_status::captured_event: return cudaErrorCapturedEvent;
    case graph_status::wrong_thread: return cudaErrorStreamCaptureWrongThread;
    case graph_status::illegal_state: return cudaErrorIllegalState;
    case graph_status::invalid_value: return cudaErrorInvalidValue;
    case graph_status::invalid_handle: return cudaErrorInvalidResourceHandle;
    case graph_status::illegal_address: return cudaErrorIllegalAddress;
  }
  return cudaErrorUnknown;
}

cudaError_t from(mem_status status) noexcept {
  switch (status) {
    case mem_status::ok: return cudaSuccess;
    case mem_status::out_of_memory: return cudaErrorMemoryAllocation;
    case mem_status::invalid_value: return cudaErrorInvalidValue;
    case mem_status::invalid_pointer: return cudaErrorInvalidValue;
    case mem_status::in_use: return cudaErrorInvalidValue;
  }
  return cudaErrorUnknown;
}

}  // namespace simcuda::rt

using namespace simcuda::rt;

namespace {
struct error_text {
  cudaError_t code;
  const char* name;
  const char* text;
};
// The codes this simulator returns, plus the ones PyTorch names in its messages.
constexpr error_text error_texts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorPeerAccessAlreadyEnabled, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorInvalidSymbol, "cudaErrorInvalidSymbol", "invalid device symbol"},
    {cudaErrorMissingConfiguration, "cudaErrorMissingConfiguration", "__global__ function call is not configured"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};
}  // namespace

extern "C" {

const char* cudaGetErrorName(cudaError_t error) {
  for (const auto& e : error_texts)
    if (e.code == error) return e.name;
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  for (const auto& e : error_texts)
    if (e.code == error) return e.text;
  return "unrecognized error code";
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

}  // extern "C"
