// Driver API: events and streams (the same objects as the runtime's handles). Stream capture
// applies as in the runtime (src/core/capture.cpp): a record on a capturing stream marks a point of
// the capture, synchronizing it is an error.
#include "driver.hpp"

using namespace simcuda;
using namespace simcuda::drv;

namespace {
event* event_of(CUevent e) {
  auto* ev = reinterpret_cast<event*>(e);
  return ev != nullptr && valid_event(ev) ? ev : nullptr;
}
}  // namespace

extern "C" {

CUresult cuEventCreate(CUevent* out, unsigned int flags) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  CUdevice device = 0;
  cuCtxGetDevice(&device);
  event* e = create_event(device, flags);
  if (e == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *out = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream handle) {
  event* ev = event_of(e);
  stream* s = resolve_stream(handle);
  if (ev == nullptr || s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  bool captured = false;
  CUresult r = from(capture_event_record(ev, s, legacy_handle(handle), false, &captured));
  if (r != CUDA_SUCCESS || captured) return r;
  record_event(ev, s);
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e) {
  event* ev = event_of(e);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = from(check_event_use(ev)); r != CUDA_SUCCESS) return r;
  return query_event(ev) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent e) {
  event* ev = event_of(e);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = from(check_event_use(ev)); r != CUDA_SUCCESS) return r;
  synchronize_event(ev);
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent e) {  // _v2
  event* ev = event_of(e);
  if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  destroy_event(ev);
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream handle) {
  stream* s = resolve_stream(handle);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = from(check_stream_sync(s, legacy_handle(handle))); r != CUDA_SUCCESS) return r;
  synchronize_stream(s);
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* out, unsigned int flags) {
  if (out == nullptr || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING))) return CUDA_ERROR_INVALID_VALUE;
  CUdevice device = 0;
  cuCtxGetDevice(&device);
  stream* s = create_stream(device, flags, 0);
  if (s == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *out = reinterpret_cast<CUstream>(s);  // the runtime's handles are the same objects
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream handle) {  // _v2
  stream* s = resolve_stream(handle);
  if (s == nullptr || legacy_handle(handle)) return CUDA_ERROR_INVALID_HANDLE;
  if (stream_capturing(s)) return not_supported("cuStreamDestroy", "the stream takes part in a stream capture");
  return destroy_stream(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuStreamWaitEvent(CUstream handle, CUevent e, unsigned int flags) {
  stream* s = resolve_stream(handle);
  event* ev = event_of(e);
  if (s == nullptr || ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  bool captured = false;
  const CUresult r = from(capture_event_wait(s, ev, legacy_handle(handle), false, &captured));
  if (r != CUDA_SUCCESS || captured) return r;
  count_stream_wait();
  tick();  // work already ran: nothing to delay (see streams.cpp)
  return CUDA_SUCCESS;
}

CUresult cuStreamGetCtx(CUstream handle, CUcontext* context) {
  stream* s = resolve_stream(handle);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = primary_context(stream_device(s));
  return CUDA_SUCCESS;
}

}  // extern "C"
