// Runtime API: stream capture and CUDA graphs, over the core's capture sequences and graphs
// (src/core/capture.cpp, Note [simulated capture]; src/core/graphs.cpp).
//
// Rationale
//   torch.cuda.graph / torch.cuda.CUDAGraph (capture_begin, capture_end, replay, reset) and the
//   caching allocator's private pools for captures need capture to work, and they need capture
//   errors to be the ones CUDA returns (a synchronize inside a capture is
//   cudaErrorStreamCaptureUnsupported, its end cudaErrorStreamCaptureInvalidated).
// Approach
//   These functions check their arguments as CUDA does and translate the core's graph_status
//   into cudaError_t. Errors CUDA defines are returned as CUDA returns them (an error value, no
//   line); what the simulator does not model (graph-launch flags, capture on the per-thread
//   default stream, graphs launched into a capture) says so on stderr, through not_supported or
//   unsupported, and is counted.
// Limitations
//   No graph editing (cudaGraphAddNode, conditional nodes: their stubs say so), no device-side
//   launch (cudaGraphInstantiateFlagDeviceLaunch). Edge data is all default (zero).
#include <vector>

#include "runtime.hpp"

using namespace simcuda;
using namespace simcuda::rt;

namespace {

graph* graph_of(cudaGraph_t g) { return reinterpret_cast<graph*>(g); }
cudaGraph_t handle_of(graph* g) { return reinterpret_cast<cudaGraph_t>(g); }
graph_node* node_of(cudaGraphNode_t n) { return reinterpret_cast<graph_node*>(n); }

bool known_mode(cudaStreamCaptureMode mode) {
  return mode == cudaStreamCaptureModeGlobal || mode == cudaStreamCaptureModeThreadLocal ||
         mode == cudaStreamCaptureModeRelaxed;
}

/// Zeroed edge data for a dependency list (every edge of a captured graph is a default edge).
const cudaGraphEdgeData* default_edges(std::size_t count) {
  thread_local std::vector<cudaGraphEdgeData> edges;
  if (edges.size() < count) edges.resize(count, cudaGraphEdgeData{});
  return edges.data();
}

/// cudaStreamPerThread is the device's default stream object here: capturing it would capture
/// the legacy stream's work too.
bool per_thread_handle(cudaStream_t handle) { return reinterpret_cast<std::uintptr_t>(handle) == 2; }

cudaError_t begin(const char* function, cudaStream_t handle, cudaGraph_t into, const cudaGraphNode_t* deps,
                  const cudaGraphEdgeData* edges, std::size_t count, cudaStreamCaptureMode mode) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (!known_mode(mode)) return result(cudaErrorInvalidValue);
  if (legacy_handle(handle)) return result(cudaErrorStreamCaptureUnsupported);  // as CUDA: not the legacy stream
  if (per_thread_handle(handle))
    return result(static_cast<cudaError_t>(unsupported(
        library, function, "capture on cudaStreamPerThread is not simulated (it is the device's default stream here)",
        cudaErrorStreamCaptureUnsupported)));
  for (std::size_t i = 0; edges != nullptr && i < count; ++i)
    if (edges[i].type != cudaGraphDependencyTypeDefault || edges[i].from_port != 0 || edges[i].to_port != 0)
      return not_supported(function, "only default graph edges are simulated");
  static_assert(sizeof(cudaGraphNode_t) == sizeof(graph_node*));
  return result(from(begin_capture(s, static_cast<capture_mode>(mode), graph_of(into),
                                   reinterpret_cast<graph_node* const*>(deps), count)));
}

}  // namespace

extern "C" {

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr || !known_mode(*mode)) return result(cudaErrorInvalidValue);
  *mode = static_cast<cudaStreamCaptureMode>(exchange_thread_capture_mode(static_cast<capture_mode>(*mode)));
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t handle, cudaStreamCaptureMode mode) {
  return begin("cudaStreamBeginCapture", handle, nullptr, nullptr, nullptr, 0, mode);
}

cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t handle, cudaGraph_t into, const cudaGraphNode_t* deps,
                                          const cudaGraphEdgeData* edges, size_t count, cudaStreamCaptureMode mode) {
  if (into == nullptr || (count > 0 && deps == nullptr)) return result(cudaErrorInvalidValue);
  return begin("cudaStreamBeginCaptureToGraph", handle, into, deps, edges, count, mode);
}

cudaError_t cudaStreamEndCapture(cudaStream_t handle, cudaGraph_t* out) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (out == nullptr) return result(cudaErrorInvalidValue);
  graph* g = nullptr;
  graph_status status = end_capture(s, &g);
  *out = handle_of(g);
  return result(from(status));
}

cudaError_t cudaStreamIsCapturing(cudaStream_t handle, cudaStreamCaptureStatus* status) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (status == nullptr) return result(cudaErrorInvalidValue);
  capture_info info;
  cudaError_t e = result(from(stream_capture_info(s, legacy_handle(handle), &info)));
  if (e != cudaSuccess) return e;
  *status = static_cast<cudaStreamCaptureStatus>(info.status);
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t handle, cudaStreamCaptureStatus* status, unsigned long long* id,
                                     cudaGraph_t* graph_out, const cudaGraphNode_t** deps,
                                     const cudaGraphEdgeData** edges, size_t* count) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (status == nullptr || (edges != nullptr && deps == nullptr)) return result(cudaErrorInvalidValue);
  capture_info info;
  cudaError_t e = result(from(stream_capture_info(s, legacy_handle(handle), &info)));
  if (e != cudaSuccess) return e;
  *status = static_cast<cudaStreamCaptureStatus>(info.status);
  if (id) *id = info.id;
  if (graph_out) *graph_out = handle_of(info.into);
  if (deps) *deps = reinterpret_cast<const cudaGraphNode_t*>(info.deps);
  if (edges) *edges = info.dep_count ? default_edges(info.dep_count) : nullptr;
  if (count) *count = info.dep_count;
  return cudaSuccess;
}

cudaError_t cudaStreamUpdateCaptureDependencies(cudaStream_t handle, cudaGraphNode_t* deps,
                                                const cudaGraphEdgeData* edges, size_t count, unsigned int flags) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (flags != cudaStreamAddCaptureDependencies && flags != cudaStreamSetCaptureDependencies)
    return result(cudaErrorInvalidValue);
  for (std::size_t i = 0; edges != nullptr && i < count; ++i)
    if (edges[i].type != cudaGraphDependencyTypeDefault || edges[i].from_port != 0 || edges[i].to_port != 0)
      return not_supported("cudaStreamUpdateCaptureDependencies", "only default graph edges are simulated");
  return result(from(update_capture_dependencies(s, reinterpret_cast<graph_node* const*>(deps), count,
                                                 flags == cudaStreamSetCaptureDependencies)));
}

cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* count) {
  return result(from(graph_nodes(graph_of(g), reinterpret_cast<graph_node**>(nodes), count)));
}

cudaError_t cudaGraphNodeGetDependencies(cudaGraphNode_t node, cudaGraphNode_t* deps, cudaGraphEdgeData* edges,
                                         size_t* count) {
  if (edges != nullptr && deps == nullptr) return result(cudaErrorInvalidValue);
  cudaError_t e = result(from(node_dependencies(node_of(node), reinterpret_cast<graph_node**>(deps), count)));
  if (e == cudaSuccess && edges != nullptr)
    for (std::size_t i = 0; i < *count; ++i) edges[i] = cudaGraphEdgeData{};
  return e;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) { return result(from(destroy_graph(graph_of(g)))); }

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* out, cudaGraph_t g, unsigned long long flags) {
  if (out == nullptr) return result(cudaErrorInvalidValue);
  const unsigned long long known = cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload |
                                   cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority;
  if (flags & ~known) return result(cudaErrorInvalidValue);
  if (flags & cudaGraphInstantiateFlagDeviceLaunch)
    return not_supported("cudaGraphInstantiateWithFlags", "device-launchable graphs are not simulated");
  // AutoFreeOnLaunch: no memory-allocation nodes are captured here; UseNodePriority and Upload
  // change nothing on a device that runs one thing at a time.
  graph_exec* x = nullptr;
  cudaError_t e = result(from(instantiate_graph(graph_of(g), &x)));
  if (e == cudaSuccess) *out = reinterpret_cast<cudaGraphExec_t>(x);
  return e;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* out, cudaGraph_t g, unsigned long long flags) {
  return cudaGraphInstantiateWithFlags(out, g, flags);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) {
  return result(from(destroy_graph_exec(reinterpret_cast<graph_exec*>(x))));
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t handle) {
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  graph_status status = launch_graph(reinterpret_cast<graph_exec*>(x), s, legacy_handle(handle), library);
  if (status == graph_status::unsupported)  // launched into a capture: a child-graph node
    unsupported(library, "cudaGraphLaunch", "launching a graph into a capturing stream (a child graph) is not simulated",
                cudaErrorStreamCaptureUnsupported);
  return result(from(status));
}

cudaError_t cudaUserObjectCreate(cudaUserObject_t* out, void* pointer, cudaHostFn_t destroy, unsigned int initial_refs,
                                 unsigned int flags) {
  if (flags != cudaUserObjectNoDestructorSync) return result(cudaErrorInvalidValue);  // the one flag CUDA takes
  user_object* o = nullptr;
  cudaError_t e = result(from(create_user_object(pointer, destroy, initial_refs, &o)));
  if (e == cudaSuccess) *out = reinterpret_cast<cudaUserObject_t>(o);
  return e;
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t o, unsigned int count) {
  return result(from(release_user_object(reinterpret_cast<user_object*>(o), count)));
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t g, cudaUserObject_t o, unsigned int count, unsigned int flags) {
  if (flags & ~static_cast<unsigned>(cudaGraphUserObjectMove)) return result(cudaErrorInvalidValue);
  return result(from(graph_retain_user_object(graph_of(g), reinterpret_cast<user_object*>(o), count,
                                              flags & cudaGraphUserObjectMove)));
}

}  // extern "C"
