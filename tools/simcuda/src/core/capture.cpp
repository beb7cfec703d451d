// Stream capture: work queued on a capturing stream is recorded as graph nodes instead of run.
//
// Note [simulated capture]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Rationale
//   PyTorch's CUDA graphs (torch.cuda.graph, torch.cuda.CUDAGraph) capture a stream, instantiate
//   the graph and replay it; its caching allocator gives a capture a private pool and asks every
//   allocation's stream for its capture id. Without capture none of that runs on the simulator.
// Approach
//   A capture sequence (an id unique in the process) begins on one stream, the origin; another
//   stream joins it by waiting on an event recorded inside it. Each member stream has a set of
//   nodes its next work depends on: queued work becomes a node of the capture's graph depending on
//   that set, which then becomes {node}. An event recorded inside a capture remembers its
//   stream's set (no node, as in CUDA); a wait adds that set to the waiting stream's. Ending the
//   capture on the origin checks that every other member was joined back (its set lies behind the
//   origin's) and ends every member's part. An invalid operation returns the error the CUDA
//   documentation gives and invalidates the capture, whose end then fails with
//   cudaErrorStreamCaptureInvalidated and no graph. The thread's interaction mode
//   (cudaThreadExchangeStreamCaptureMode) decides which potentially unsafe calls (cudaMalloc,
//   cudaFree, synchronous copies, event queries) are prohibited, as cudaStreamCaptureMode says:
//   global prohibits them while this thread has a non-relaxed capture or any thread a global
//   one; thread-local only while this thread has a non-relaxed capture; relaxed never.
// Limitations
//   Synchronizing a stream that is not capturing is allowed in every mode (only the capturing
//   stream, the device and the legacy stream are checked). Waiting inside a capture on an event
//   recorded outside it is an isolation error even when that event was never recorded. The
//   per-thread default stream is the device's default stream here: capture on it is refused.
//   Graph objects and launches are in graphs.cpp.
#include <algorithm>
#include <unordered_set>

#include "detail.hpp"
#include "graph_state.hpp"

namespace simcuda {
namespace detail {

struct capture {
  std::uint64_t id = 0;
  capture_mode mode = capture_mode::global;
  std::thread::id thread;
  stream* origin = nullptr;
  int device = 0;
  graph* into = nullptr;
  bool owns_graph = true;  ///< begun without a graph: a failed end destroys the one it made
  capture_status status = capture_status::active;
  std::unordered_set<stream*> streams;  ///< members, the origin included
};

graph_state& the_graph_state() {
  static graph_state* s = new graph_state;  // never destroyed: used during static teardown
  return *s;
}

void forget_event(const event* e) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  st.captured_events.erase(e);
}

}  // namespace detail

namespace {

using namespace detail;

thread_local capture_mode t_mode = capture_mode::global;

constexpr unsigned non_blocking_flag = 0x1;  // cudaStreamNonBlocking / CU_STREAM_NON_BLOCKING

/// The legacy stream of `device` is used: a capture there with a blocking member is invalidated,
/// since the legacy stream would wait on (depend on) captured work.
bool implicit_locked(graph_state& st, int device) {
  bool hit = false;
  for (capture* c : st.captures) {
    if (c->device != device) continue;
    for (stream* m : c->streams)
      if (!(stream_flags(m) & non_blocking_flag)) {
        c->status = capture_status::invalidated;
        hit = true;
        break;
      }
  }
  return hit;
}

membership* member_locked(graph_state& st, stream* s) {
  auto it = st.members.find(s);
  return it == st.members.end() ? nullptr : &it->second;
}

void add_unique(std::vector<graph_node*>& into, const std::vector<graph_node*>& more) {
  for (graph_node* n : more)
    if (std::find(into.begin(), into.end(), n) == into.end()) into.push_back(n);
}

bool is_node_of_locked(graph_state& st, graph_node* n, const graph* g) {
  return n != nullptr && st.nodes.count(n) && n->magic == node_magic && n->owner == g;
}

/// Ends `c`: every member leaves it; events recorded in it keep a marker with no capture.
void finish_locked(graph_state& st, capture* c) {
  for (stream* m : c->streams) st.members.erase(m);
  for (auto& [e, ce] : st.captured_events)
    if (ce.in == c) {
      ce.in = nullptr;
      ce.deps.clear();
    }
  c->into->capturing = false;
  st.captures.erase(c);
  delete c;
}

/// The captures that prohibit a potentially unsafe call from this thread in `mode`.
std::vector<capture*> prohibiting_locked(graph_state& st, capture_mode mode) {
  std::vector<capture*> why;
  if (mode == capture_mode::relaxed) return why;
  const auto self = std::this_thread::get_id();
  for (capture* c : st.captures) {
    const bool own = c->thread == self && c->mode != capture_mode::relaxed;
    const bool global = mode == capture_mode::global && c->mode == capture_mode::global;
    if (own || global) why.push_back(c);
  }
  return why;
}

}  // namespace

capture_mode exchange_thread_capture_mode(capture_mode mode) noexcept {
  capture_mode previous = t_mode;
  t_mode = mode;
  return previous;
}

graph_status begin_capture(stream* s, capture_mode mode, graph* into, graph_node* const* deps,
                           std::size_t dep_count) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (member_locked(st, s)) return graph_status::illegal_state;  // already capturing
  if (into != nullptr && (!st.graphs.count(into) || into->magic != graph_magic || into->capturing))
    return graph_status::invalid_value;
  if (dep_count > 0 && (into == nullptr || deps == nullptr)) return graph_status::invalid_value;
  std::vector<graph_node*> start;
  for (std::size_t i = 0; i < dep_count; ++i) {
    if (!is_node_of_locked(st, deps[i], into)) return graph_status::invalid_value;
    add_unique(start, {deps[i]});
  }
  graph* g = into;
  if (g == nullptr) {
    g = new graph;
    st.graphs.insert(g);
  }
  g->capturing = true;
  auto* c = new capture;
  c->id = st.next_capture_id++;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->origin = s;
  c->device = stream_device(s);
  c->into = g;
  c->owns_graph = into == nullptr;
  c->streams.insert(s);
  st.captures.insert(c);
  st.members[s] = membership{c, std::move(start), {}};
  return graph_status::ok;
}

graph_status end_capture(stream* s, graph** out) noexcept {
  *out = nullptr;
  graph_state& st = the_graph_state();
  std::unique_lock lock(st.mu);
  membership* m = member_locked(st, s);
  if (m == nullptr) return graph_status::illegal_state;  // not capturing
  capture* c = m->in;
  if (c->origin != s) {
    c->status = capture_status::invalidated;
    return graph_status::unmatched;
  }
  if (c->mode != capture_mode::relaxed && c->thread != std::this_thread::get_id()) return graph_status::wrong_thread;
  graph_status status = graph_status::ok;
  if (c->status == capture_status::invalidated) {
    status = graph_status::invalidated;
  } else {
    // Joined: every other member's dependencies are the origin's or lie behind them.
    std::unordered_set<graph_node*> behind;
    std::vector<graph_node*> todo = m->deps;
    while (!todo.empty()) {
      graph_node* n = todo.back();
      todo.pop_back();
      if (!behind.insert(n).second) continue;
      todo.insert(todo.end(), n->deps.begin(), n->deps.end());
    }
    for (stream* other : c->streams) {
      if (other == s) continue;
      for (graph_node* n : st.members[other].deps)
        if (!behind.count(n)) status = graph_status::unjoined;
    }
  }
  graph* g = c->into;
  const bool owns = c->owns_graph;
  finish_locked(st, c);
  if (status == graph_status::ok) {
    *out = g;
    return status;
  }
  if (owns) {
    std::vector<user_object*> dead;
    delete_graph_locked(st, g, dead);
    lock.unlock();
    release_dead(dead);
  }
  return status;
}

graph_status stream_capture_info(stream* s, bool legacy, capture_info* out) noexcept {
  *out = capture_info{};
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (legacy && implicit_locked(st, stream_device(s))) return graph_status::implicit;
  membership* m = member_locked(st, s);
  if (m == nullptr) return graph_status::ok;
  out->status = m->in->status;
  out->id = m->in->id;
  if (m->in->status == capture_status::active) {
    out->into = m->in->into;
    m->published = m->deps;
    out->deps = m->published.data();
    out->dep_count = m->published.size();
  }
  return graph_status::ok;
}

graph_status update_capture_dependencies(stream* s, graph_node* const* deps, std::size_t count, bool replace) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  membership* m = member_locked(st, s);
  if (m == nullptr) return graph_status::illegal_state;
  if (m->in->status == capture_status::invalidated) return graph_status::invalidated;
  if (count > 0 && deps == nullptr) return graph_status::invalid_value;
  std::vector<graph_node*> next;
  for (std::size_t i = 0; i < count; ++i) {
    if (!is_node_of_locked(st, deps[i], m->in->into)) return graph_status::invalid_value;
    add_unique(next, {deps[i]});
  }
  if (replace) m->deps = std::move(next);
  else add_unique(m->deps, next);
  return graph_status::ok;
}

graph_status capture_work(stream* s, bool legacy, const node_work& work, bool* captured) noexcept {
  *captured = false;
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (legacy && implicit_locked(st, stream_device(s))) return graph_status::implicit;
  membership* m = member_locked(st, s);
  if (m == nullptr) return graph_status::ok;
  *captured = true;
  if (m->in->status == capture_status::invalidated) return graph_status::invalidated;
  graph_node* n = add_node_locked(st, m->in->into, work, m->deps);
  m->deps = {n};
  return graph_status::ok;
}

graph_status capture_event_record(event* e, stream* s, bool legacy, bool external, bool* captured) noexcept {
  *captured = false;
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (legacy && implicit_locked(st, stream_device(s))) return graph_status::implicit;
  membership* m = member_locked(st, s);
  if (m == nullptr) {
    st.captured_events.erase(e);  // recorded outside any capture again
    return graph_status::ok;
  }
  *captured = true;
  capture* c = m->in;
  if (c->status == capture_status::invalidated) return graph_status::invalidated;
  if (external) {
    node_work work;
    work.kind = node_kind::event_record;
    work.target = e;
    graph_node* n = add_node_locked(st, c->into, work, m->deps);
    m->deps = {n};
  }
  st.captured_events[e] = captured_event{c, c->id, m->deps};
  return graph_status::ok;
}

graph_status capture_event_wait(stream* s, event* e, bool legacy, bool external, bool* captured) noexcept {
  *captured = false;
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (legacy && implicit_locked(st, stream_device(s))) return graph_status::implicit;
  membership* m = member_locked(st, s);
  auto found = st.captured_events.find(e);
  if (found != st.captured_events.end()) {
    captured_event& ce = found->second;
    if (ce.in == nullptr) {  // recorded in a capture that has ended
      if (m != nullptr) m->in->status = capture_status::invalidated;
      return graph_status::captured_event;
    }
    *captured = true;
    if (m == nullptr) {  // a fork: the stream joins the capture where the event was recorded
      ce.in->streams.insert(s);
      st.members[s] = membership{ce.in, ce.deps, {}};
      return ce.in->status == capture_status::invalidated ? graph_status::invalidated : graph_status::ok;
    }
    if (m->in != ce.in) {
      m->in->status = capture_status::invalidated;
      ce.in->status = capture_status::invalidated;
      return graph_status::merge;
    }
    if (m->in->status == capture_status::invalidated) return graph_status::invalidated;
    add_unique(m->deps, ce.deps);  // a join
    return graph_status::ok;
  }
  if (m == nullptr) return graph_status::ok;  // neither side captures
  *captured = true;
  if (m->in->status == capture_status::invalidated) return graph_status::invalidated;
  if (!external) {
    m->in->status = capture_status::invalidated;
    return graph_status::isolation;
  }
  node_work work;
  work.kind = node_kind::event_wait;
  work.target = e;
  graph_node* n = add_node_locked(st, m->in->into, work, m->deps);
  m->deps = {n};
  return graph_status::ok;
}

graph_status refuse_in_capture(stream* s) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  membership* m = member_locked(st, s);
  if (m == nullptr) return graph_status::ok;
  m->in->status = capture_status::invalidated;
  return graph_status::unsupported;
}

graph_status check_stream_sync(stream* s, bool legacy) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (legacy && implicit_locked(st, stream_device(s))) return graph_status::implicit;
  membership* m = member_locked(st, s);
  if (m == nullptr) return graph_status::ok;
  m->in->status = capture_status::invalidated;
  return graph_status::unsupported;
}

graph_status check_event_use(event* e) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  auto found = st.captured_events.find(e);
  if (found != st.captured_events.end()) {
    if (found->second.in != nullptr) found->second.in->status = capture_status::invalidated;
    return graph_status::captured_event;
  }
  std::vector<capture*> why = prohibiting_locked(st, t_mode);
  for (capture* c : why) c->status = capture_status::invalidated;
  return why.empty() ? graph_status::ok : graph_status::unsupported;
}

graph_status check_device_sync(int device) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  bool hit = false;
  for (capture* c : st.captures)
    if (device < 0 || c->device == device) {
      c->status = capture_status::invalidated;
      hit = true;
    }
  return hit ? graph_status::unsupported : graph_status::ok;
}

graph_status check_unsafe_call() noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  std::vector<capture*> why = prohibiting_locked(st, t_mode);
  for (capture* c : why) c->status = capture_status::invalidated;
  return why.empty() ? graph_status::ok : graph_status::unsupported;
}

graph_status check_legacy_use(int device) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  return implicit_locked(st, device) ? graph_status::implicit : graph_status::ok;
}

bool stream_capturing(stream* s) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  return member_locked(st, s) != nullptr;
}

}  // namespace simcuda
