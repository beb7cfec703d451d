// Runtime API: streams, events and host callbacks. On a capturing stream, work and event records
// go into the capture (graph.cpp, src/core/capture.cpp); synchronizing it is an error.
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "runtime.hpp"

using namespace simcuda;
using namespace simcuda::rt;

namespace {

cudaStream_t handle_of(stream* s) { return reinterpret_cast<cudaStream_t>(s); }

event* event_of(cudaEvent_t e) {
  auto* ev = reinterpret_cast<event*>(e);
  return ev != nullptr && valid_event(ev) ? ev : nullptr;
}

struct ipc_event_descriptor {
  std::uint32_t magic;
  std::int32_t pid;
  std::int32_t device;
};
constexpr std::uint32_t ipc_event_magic = 0x53494d45;  // "SIME"

constexpr unsigned stream_flag_mask = cudaStreamNonBlocking;
constexpr unsigned event_flag_mask = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;

}  // namespace

extern "C" {

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* out, unsigned int flags, int priority) {
  if (out == nullptr || (flags & ~stream_flag_mask)) return result(cudaErrorInvalidValue);
  if (priority > 0) priority = 0;    // clamped to the range, as CUDA does
  if (priority < -5) priority = -5;
  stream* s = create_stream(current_device(), flags, priority);
  if (s == nullptr) return result(cudaErrorInvalidDevice);
  *out = handle_of(s);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* out, unsigned int flags) {
  return cudaStreamCreateWithPriority(out, flags, 0);
}

cudaError_t cudaStreamCreate(cudaStream_t* out) { return cudaStreamCreateWithPriority(out, 0, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  stream* s = stream_of(handle);
  if (s == nullptr || handle == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (stream_capturing(s)) {  // CUDA leaves this undefined: refuse it, and say so
    refuse_in_capture(s);
    return result(static_cast<cudaError_t>(unsupported(library, "cudaStreamDestroy",
                                                       "the stream takes part in a stream capture (capture invalidated)",
                                                       cudaErrorStreamCaptureUnsupported)));
  }
  if (!destroy_stream(s)) return result(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaStreamGetPriority(cudaStream_t handle, int* priority) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (priority == nullptr) return result(cudaErrorInvalidValue);
  *priority = stream_priority(s);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  cudaError_t e = result(from(check_stream_sync(s, legacy_handle(handle))));
  if (e != cudaSuccess) return e;
  synchronize_stream(s);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  cudaError_t e = result(from(check_stream_sync(s, legacy_handle(handle))));
  if (e != cudaSuccess) return e;
  return query_stream(s) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t handle, cudaEvent_t e, unsigned int flags) {
  stream* s = stream_of(handle);
  event* ev = event_of(e);
  if (s == nullptr || ev == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (flags & ~static_cast<unsigned>(cudaEventWaitExternal)) return result(cudaErrorInvalidValue);
  bool captured = false;
  cudaError_t status = result(
      from(capture_event_wait(s, ev, legacy_handle(handle), flags & cudaEventWaitExternal, &captured)));
  if (status != cudaSuccess || captured) return status;  // a fork or join of a capture
  count_stream_wait();
  tick();  // work already ran: nothing to delay (see streams.cpp)
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void* data) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (fn == nullptr) return result(cudaErrorInvalidValue);
  node_work work;
  work.kind = node_kind::host;
  work.host_fn = fn;
  work.host_data = data;
  bool captured = false;
  cudaError_t e = enqueue(s, handle, work, &captured);
  if (e != cudaSuccess || captured) return e;  // a host node runs at each launch of the graph
  tick();
  fn(data);  // the stream's earlier work is done: it ran at its call
  return cudaSuccess;
}

cudaError_t cudaStreamAddCallback(cudaStream_t handle, cudaStreamCallback_t fn, void* data, unsigned int flags) {
  if (flags != 0 || fn == nullptr) return result(cudaErrorInvalidValue);
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (refuse_in_capture(s) != graph_status::ok)
    return result(static_cast<cudaError_t>(unsupported(
        library, "cudaStreamAddCallback", "a stream callback cannot be captured (use cudaLaunchHostFunc); capture invalidated",
        cudaErrorStreamCaptureUnsupported)));
  tick();
  fn(handle, cudaSuccess, data);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* out, unsigned int flags) {
  if (out == nullptr || (flags & ~event_flag_mask)) return result(cudaErrorInvalidValue);
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return result(cudaErrorInvalidValue);
  event* e = create_event(current_device(), flags);
  if (e == nullptr) return result(cudaErrorInvalidDevice);
  *out = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* out) { return cudaEventCreateWithFlags(out, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  event* ev = event_of(e);
  if (ev == nullptr) return result(cudaErrorInvalidResourceHandle);
  destroy_event(ev);
  return cudaSuccess;
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t handle, unsigned int flags) {
  event* ev = event_of(e);
  stream* s = stream_of(handle);
  if (ev == nullptr || s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (flags & ~static_cast<unsigned>(cudaEventRecordExternal)) return result(cudaErrorInvalidValue);
  bool captured = false;
  cudaError_t status = result(
      from(capture_event_record(ev, s, legacy_handle(handle), flags & cudaEventRecordExternal, &captured)));
  if (status != cudaSuccess || captured) return status;  // the event marks a point of the capture
  record_event(ev, s);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t handle) { return cudaEventRecordWithFlags(e, handle, 0); }

cudaError_t cudaEventQuery(cudaEvent_t e) {
  event* ev = event_of(e);
  if (ev == nullptr) return result(cudaErrorInvalidResourceHandle);
  cudaError_t status = result(from(check_event_use(ev)));
  if (status != cudaSuccess) return status;
  return query_event(ev) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  event* ev = event_of(e);
  if (ev == nullptr) return result(cudaErrorInvalidResourceHandle);
  cudaError_t status = result(from(check_event_use(ev)));
  if (status != cudaSuccess) return status;
  synchronize_event(ev);
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  event* a = event_of(start);
  event* b = event_of(end);
  if (ms == nullptr) return result(cudaErrorInvalidValue);
  if (a == nullptr || b == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (!elapsed_ms(a, b, ms)) return result(cudaErrorNotReady);
  return cudaSuccess;
}

/// Interprocess events. Work runs at its call, so whatever an exporter recorded before it sent
/// the handle has already run: the opened event is complete, which is what a waiter needs.
cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t e) {
  event* ev = event_of(e);
  if (handle == nullptr) return result(cudaErrorInvalidValue);
  if (ev == nullptr || !(event_flags(ev) & cudaEventInterprocess)) return result(cudaErrorInvalidResourceHandle);
  ipc_event_descriptor d{ipc_event_magic, static_cast<std::int32_t>(getpid()), event_device(ev)};
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, &d, sizeof d);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* out, cudaIpcEventHandle_t handle) {
  if (out == nullptr) return result(cudaErrorInvalidValue);
  ipc_event_descriptor d;
  std::memcpy(&d, handle.reserved, sizeof d);
  if (d.magic != ipc_event_magic || !valid_device(d.device)) return result(cudaErrorInvalidResourceHandle);
  if (d.pid == static_cast<std::int32_t>(getpid())) return result(cudaErrorDeviceUninitialized);  // as CUDA: not in the exporter
  event* ev = create_event(d.device, cudaEventDisableTiming | cudaEventInterprocess);
  if (ev == nullptr) return result(cudaErrorInvalidDevice);
  *out = reinterpret_cast<cudaEvent_t>(ev);
  return cudaSuccess;
}

}  // extern "C"
