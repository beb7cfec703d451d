// Stream capture and graphs of the simulated GPUs.
// Part of simcuda's core API (core.hpp gathers it, with the glossary).
#pragma once

#include "simcuda/streams.hpp"

namespace simcuda {

// ---------------------------------------------------------------------------------------------
// Stream capture and graphs (src/core/capture.cpp, src/core/graphs.cpp; Note [simulated capture]).
// While a stream captures, its work is recorded as graph nodes instead of run; launching the
// instantiated graph runs the recorded copies and memsets in order on the launch stream.
// ---------------------------------------------------------------------------------------------

/// cudaStreamCaptureMode / CUstreamCaptureMode (the numbers agree).
enum class capture_mode { global = 0, thread_local_mode = 1, relaxed = 2 };
/// cudaStreamCaptureStatus / CUstreamCaptureStatus.
enum class capture_status { none = 0, active = 1, invalidated = 2 };

/// Outcome of a capture or graph call; the stand-ins translate it to their error enum.
enum class graph_status {
  ok,
  unsupported,      ///< not permitted while capturing (cudaErrorStreamCaptureUnsupported)
  invalidated,      ///< the capture was invalidated by an earlier error (cudaErrorStreamCaptureInvalidated)
  merge,            ///< would merge two independent captures (cudaErrorStreamCaptureMerge)
  unmatched,        ///< the capture did not begin on this stream (cudaErrorStreamCaptureUnmatched)
  unjoined,         ///< a forked stream was not joined back (cudaErrorStreamCaptureUnjoined)
  isolation,        ///< a dependency on work outside the capture (cudaErrorStreamCaptureIsolation)
  implicit,         ///< the legacy stream would depend on a capturing blocking stream
  captured_event,   ///< the event was last recorded in a capture (cudaErrorCapturedEvent)
  wrong_thread,     ///< a non-relaxed capture ended by another thread (cudaErrorStreamCaptureWrongThread)
  illegal_state,    ///< e.g. a capture begun on a stream already capturing (cudaErrorIllegalState)
  invalid_value,
  invalid_handle,
  illegal_address,  ///< a graph launch whose node touches memory that is no longer accessible
};

const char* to_string(graph_status status) noexcept;

struct graph;
struct graph_node;
struct graph_exec;
struct user_object;

enum class node_kind { kernel, memcpy, memset, event_record, event_wait, host };

/// One unit of captured work. A copy or memset covers `height` rows of `width` bytes (memset:
/// elements of `element_size` bytes), rows `dst_pitch` / `src_pitch` bytes apart.
struct node_work {
  node_kind kind = node_kind::kernel;
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t width = 0;
  std::size_t height = 1;
  std::size_t dst_pitch = 0;
  std::size_t src_pitch = 0;
  std::uint32_t value = 0;
  unsigned element_size = 1;
  event* target = nullptr;                 ///< event_record, event_wait
  void (*host_fn)(void*) = nullptr;        ///< host
  void* host_data = nullptr;
  const void* function = nullptr;          ///< kernel (informational)
};

/// Sets the calling thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode) and
/// returns the one it replaces.
capture_mode exchange_thread_capture_mode(capture_mode mode) noexcept;

/// cudaStreamBeginCapture(ToGraph): `into` (nullable) is an existing graph to add to, `deps` the
/// nodes of it the first captured work depends on.
graph_status begin_capture(stream* s, capture_mode mode, graph* into, graph_node* const* deps,
                           std::size_t dep_count) noexcept;
/// cudaStreamEndCapture: the graph, or nullptr and the reason the capture failed.
graph_status end_capture(stream* s, graph** out) noexcept;

struct capture_info {
  capture_status status = capture_status::none;
  std::uint64_t id = 0;
  graph* into = nullptr;
  graph_node* const* deps = nullptr;  ///< valid until the next capture call on the stream
  std::size_t dep_count = 0;
};
/// The capture state of `s`. `legacy`: the handle named the legacy default stream (then a capture
/// on a blocking stream of its device is an implicit dependency: status implicit, and invalidated).
graph_status stream_capture_info(stream* s, bool legacy, capture_info* out) noexcept;
/// cudaStreamUpdateCaptureDependencies: add (`replace` false) or set the stream's dependencies.
graph_status update_capture_dependencies(stream* s, graph_node* const* deps, std::size_t count, bool replace) noexcept;

/// Work queued on `s`. Not capturing: `*captured` false, ok (the caller runs it). Capturing: the
/// work becomes a node (`*captured` true), or the error (invalidated, implicit).
graph_status capture_work(stream* s, bool legacy, const node_work& work, bool* captured) noexcept;
/// A kernel launch's shape: the grid and block extents and threads per block the device allows,
/// and dynamic shared memory up to `shared_limit_bytes` (what the function may ask for).
bool launch_shape_valid(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        std::size_t shared_bytes, std::size_t shared_limit_bytes) noexcept;
/// A kernel launch whose shape is valid, from the runtime or the driver: recorded as a kernel
/// node when `s` captures (counted when a launch of the graph runs it), else counted and skipped.
graph_status launch_kernel(stream* s, bool legacy, const void* function) noexcept;
/// cudaEventRecord on `s`: inside a capture the event remembers the capture's position
/// (`external`: also an event-record node); outside, any capture marker of the event is dropped.
graph_status capture_event_record(event* e, stream* s, bool legacy, bool external, bool* captured) noexcept;
/// cudaStreamWaitEvent: joins `s` to the capture `e` was recorded in, or adds `e`'s position to
/// its dependencies; a capturing stream waiting on outside work is an isolation error
/// (`external`: an event-wait node instead).
graph_status capture_event_wait(stream* s, event* e, bool legacy, bool external, bool* captured) noexcept;
/// Work that cannot be captured (a stream callback, cudaMallocAsync, ...): unsupported and the
/// capture invalidated when `s` captures; ok otherwise.
graph_status refuse_in_capture(stream* s) noexcept;
/// Synchronizing or querying `s`: unsupported (and invalidated) when it captures; implicit when
/// `legacy` and a blocking stream of its device captures.
graph_status check_stream_sync(stream* s, bool legacy) noexcept;
/// Querying or synchronizing `e`: captured_event when last recorded in a capture, else as an
/// unsafe call (check_unsafe_call).
graph_status check_event_use(event* e) noexcept;
/// A device-wide synchronize: unsupported (and every capture on it invalidated) while any of its
/// streams captures.
graph_status check_device_sync(int device) noexcept;
/// A potentially unsafe call (cudaMalloc, cudaFree, a synchronous copy, ...) from this thread:
/// unsupported when the thread's mode and the ongoing captures prohibit it (then those captures
/// are invalidated), as cudaStreamCaptureMode describes.
graph_status check_unsafe_call() noexcept;
/// Use of the legacy default stream of `device` (a synchronous copy): implicit while a blocking
/// stream of it captures.
graph_status check_legacy_use(int device) noexcept;
/// Whether `s` takes part in a capture (destroying it then is refused).
bool stream_capturing(stream* s) noexcept;

/// cudaGraphGetNodes semantics: with `out` null, *count = nodes; else up to *count handles, the
/// rest of `out` nulled, and *count = min(*count, nodes).
graph_status graph_nodes(graph* g, graph_node** out, std::size_t* count) noexcept;
graph_status node_dependencies(graph_node* n, graph_node** out, std::size_t* count) noexcept;
graph_status destroy_graph(graph* g) noexcept;
graph_status instantiate_graph(graph* g, graph_exec** out) noexcept;
graph_status destroy_graph_exec(graph_exec* x) noexcept;
/// Runs the recorded work on `s`, in order. Memory every node touches is checked first: a node
/// over memory freed since capture is illegal_address (said on stderr through illegal_operand,
/// in `library`'s name), and nothing runs.
graph_status launch_graph(graph_exec* x, stream* s, bool legacy, const char* library) noexcept;

/// User objects (cudaUserObjectCreate): a destructor run when the last reference goes.
graph_status create_user_object(void* pointer, void (*destroy)(void*), unsigned initial_refs, user_object** out) noexcept;
graph_status release_user_object(user_object* o, unsigned count) noexcept;
/// The graph takes `count` references (`move`: the caller's, else new ones); instantiated
/// graphs hold their own, released with them.
graph_status graph_retain_user_object(graph* g, user_object* o, unsigned count, bool move) noexcept;

}  // namespace simcuda
