// Driver API: initialisation, versions, devices, primary contexts and the context stack.
// There is one context per device, its primary context, as the CUDA runtime uses; the
// calling thread's current context is the top of its stack, else the runtime's current device.
#include <cstdio>
#include <cstring>
#include <vector>

#include "driver.hpp"

using namespace simcuda;
using namespace simcuda::drv;

namespace {

struct context_object {
  std::uint32_t magic = 0x43545854;  // "CTXT"
  int device = 0;
};

context_object g_contexts[16];

thread_local std::vector<CUcontext> t_stack;
thread_local bool t_cleared = false;  ///< cuCtxSetCurrent(nullptr) with an empty stack

}  // namespace

namespace simcuda::drv {

CUcontext primary_context(int device) noexcept {
  g_contexts[device].device = device;
  return reinterpret_cast<CUcontext>(&g_contexts[device]);
}

int context_device(CUcontext context) noexcept {
  auto* c = reinterpret_cast<context_object*>(context);
  if (c < &g_contexts[0] || c >= &g_contexts[16] || !valid_device(c->device)) return -1;
  return c->device;
}

CUresult from(mem_status status) noexcept {
  switch (status) {
    case mem_status::ok: return CUDA_SUCCESS;
    case mem_status::out_of_memory: return CUDA_ERROR_OUT_OF_MEMORY;
    case mem_status::invalid_value: return CUDA_ERROR_INVALID_VALUE;
    case mem_status::invalid_pointer: return CUDA_ERROR_INVALID_VALUE;
    case mem_status::in_use: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_UNKNOWN;
}

CUresult from(graph_status status) noexcept {
  switch (status) {
    case graph_status::ok: return CUDA_SUCCESS;
    case graph_status::unsupported: return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    case graph_status::invalidated: return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    case graph_status::merge: return CUDA_ERROR_STREAM_CAPTURE_MERGE;
    case graph_status::unmatched: return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    case graph_status::unjoined: return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    case graph_status::isolation: return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    case graph_status::implicit: return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    case graph_status::captured_event: return CUDA_ERROR_CAPTURED_EVENT;
    case graph_status::wrong_thread: return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    case graph_status::illegal_state: return CUDA_ERROR_ILLEGAL_STATE;
    case graph_status::invalid_value: return CUDA_ERROR_INVALID_VALUE;
    case graph_status::invalid_handle: return CUDA_ERROR_INVALID_HANDLE;
    case graph_status::illegal_address: return CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  return CUDA_ERROR_UNKNOWN;
}

CUresult not_supported(const char* function, const char* why) noexcept {
  return static_cast<CUresult>(unsupported(library, function, why, CUDA_ERROR_NOT_SUPPORTED));
}

}  // namespace simcuda::drv

extern "C" {

CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13020;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = device_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (!device_attribute(attribute, device, value)) {
    char why[64];
    std::snprintf(why, sizeof why, "device attribute %d is not modelled", static_cast<int>(attribute));
    return not_supported("cuDeviceGetAttribute", why);
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<std::size_t>(length), "%s", current_config().gpu.name.c_str());
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {  // cuDeviceTotalMem_v2 (cuda.h macro)
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = current_config().gpu.memory_bytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  device_uuid(machine_device(device), reinterpret_cast<unsigned char*>(uuid->bytes));
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  mark_device_active(device);
  *context = primary_context(device);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {  // _v2
  return valid_device(device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  *flags = 0;
  *active = device_active(device) ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!t_stack.empty()) *context = t_stack.back();
  else if (t_cleared || !device_active(current_device())) *context = nullptr;
  else *context = primary_context(current_device());
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (context == nullptr) {
    if (!t_stack.empty()) t_stack.pop_back();
    else t_cleared = true;
    return CUDA_SUCCESS;
  }
  int device = context_device(context);
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!t_stack.empty()) t_stack.back() = context;
  else set_current_device(device);
  t_cleared = false;
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext context) {  // _v2
  if (context_device(context) < 0) return CUDA_ERROR_INVALID_CONTEXT;
  t_stack.push_back(context);
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* context) {  // _v2
  if (t_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (context) *context = t_stack.back();
  t_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = t_stack.empty() ? current_device() : context_device(t_stack.back());
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  CUdevice device = 0;
  cuCtxGetDevice(&device);
  if (CUresult r = from(check_device_sync(device)); r != CUDA_SUCCESS) return r;  // a stream of it captures
  synchronize_device(device);
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "initialization error"; break;
    case CUDA_ERROR_INVALID_DEVICE: *text = "invalid device ordinal"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *text = "invalid device context"; break;
    case CUDA_ERROR_INVALID_HANDLE: *text = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found"; break;
    case CUDA_ERROR_NOT_READY: *text = "device not ready"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *text = "an illegal memory access was encountered"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *text = "operation not supported"; break;
    case CUDA_ERROR_NOT_PERMITTED: *text = "operation not permitted"; break;
    case CUDA_ERROR_ILLEGAL_STATE: *text = "the operation cannot be performed in the present state"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *text = "operation not permitted when stream is capturing"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *text = "operation failed due to a previous error during capture"; break;
    case CUDA_ERROR_STREAM_CAPTURE_MERGE: *text = "operation would result in a merge of separate capture sequences"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED: *text = "capture was not ended in the same stream as it began"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED: *text = "capturing stream has unjoined work"; break;
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION: *text = "dependency created on uncaptured work in another stream"; break;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: *text = "operation would make the legacy stream depend on a capturing blocking stream"; break;
    case CUDA_ERROR_CAPTURED_EVENT: *text = "operation not permitted on an event last recorded in a capturing stream"; break;
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: *text = "attempt to terminate a thread-local capture sequence from another thread"; break;
    default: *text = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *text = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *text = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_INVALID_DEVICE: *text = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *text = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *text = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *text = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_NOT_READY: *text = "CUDA_ERROR_NOT_READY"; break;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *text = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *text = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_NOT_PERMITTED: *text = "CUDA_ERROR_NOT_PERMITTED"; break;
    case CUDA_ERROR_ILLEGAL_STATE: *text = "CUDA_ERROR_ILLEGAL_STATE"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: *text = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: *text = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_MERGE: *text = "CUDA_ERROR_STREAM_CAPTURE_MERGE"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED: *text = "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED: *text = "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"; break;
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION: *text = "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"; break;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: *text = "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"; break;
    case CUDA_ERROR_CAPTURED_EVENT: *text = "CUDA_ERROR_CAPTURED_EVENT"; break;
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: *text = "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"; break;
    default: *text = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // extern "C"
