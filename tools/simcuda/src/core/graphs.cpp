// Graphs: what a capture recorded (Note [simulated capture] in capture.cpp), instantiated and
// launched, and the user objects graphs keep alive.
//
// Rationale
//   A captured graph is replayed many times, each replay doing the captured copies and memsets
//   again over the same addresses, so PyTorch's static inputs and outputs behave as on a GPU.
// Approach
//   A graph is its nodes in creation order, each with the nodes it depends on (handles are the
//   node objects, checked against a live set). Instantiation copies the nodes' work into an
//   executable graph, which takes its own references to the graph's user objects; the graph may
//   then be destroyed. A launch first checks every range a node touches (freed memory is an
//   illegal address, said and counted, and nothing runs), then runs the nodes in order on the
//   launch stream: copies and memsets are real, kernels are counted and skipped, event-record
//   nodes record on the launch stream, host nodes call their function.
// Limitations
//   Nodes run in creation order, one at a time (a valid order of the graph). Counters count the
//   work when a launch runs it, not when it is captured. A user object's destructor runs on the
//   thread that drops its last reference, at that moment (CUDA runs it later, on its own thread).
//   No graph editing (cudaGraphAddNode, conditional nodes), no child graphs, no device launch.
#include <cstring>

#include "detail.hpp"
#include "graph_state.hpp"

namespace simcuda {

namespace detail {

graph_node* add_node_locked(graph_state& st, graph* g, const node_work& work, const std::vector<graph_node*>& deps) {
  auto n = std::make_unique<graph_node>();
  n->owner = g;
  n->work = work;
  n->deps = deps;
  graph_node* raw = n.get();
  g->nodes.push_back(std::move(n));
  st.nodes.insert(raw);
  return raw;
}

void drop_refs_locked(graph_state& st, user_object* o, unsigned count, std::vector<user_object*>& dead) {
  o->refs -= count < o->refs ? count : o->refs;
  if (o->refs == 0 && st.user_objects.erase(o)) dead.push_back(o);
}

void delete_graph_locked(graph_state& st, graph* g, std::vector<user_object*>& dead) {
  for (auto& n : g->nodes) {
    st.nodes.erase(n.get());
    n->magic = 0;
  }
  for (auto& [o, count] : g->user_refs) drop_refs_locked(st, o, count, dead);
  st.graphs.erase(g);
  g->magic = 0;
  delete g;
}

void release_dead(std::vector<user_object*>& dead) noexcept {
  for (user_object* o : dead) {
    if (o->destroy != nullptr) o->destroy(o->pointer);
    o->magic = 0;
    delete o;
  }
  dead.clear();
}

}  // namespace detail

namespace {

using namespace detail;

bool live_graph_locked(graph_state& st, const graph* g) {
  return g != nullptr && st.graphs.count(const_cast<graph*>(g)) && g->magic == graph_magic;
}

bool live_user_object_locked(graph_state& st, const user_object* o) {
  return o != nullptr && st.user_objects.count(const_cast<user_object*>(o)) && o->magic == user_object_magic;
}

graph_status list_nodes(const std::vector<graph_node*>& nodes, graph_node** out, std::size_t* count) {
  if (count == nullptr) return graph_status::invalid_value;
  if (out == nullptr) {
    *count = nodes.size();
    return graph_status::ok;
  }
  const std::size_t asked = *count;
  for (std::size_t i = 0; i < asked; ++i) out[i] = i < nodes.size() ? nodes[i] : nullptr;
  *count = asked < nodes.size() ? asked : nodes.size();
  return graph_status::ok;
}

/// A side of a copy: accessible device memory, or anything outside the device arenas (host
/// memory, which the caller vouched for at capture as CUDA lets it).
bool side_ok(const void* pointer, std::size_t bytes) {
  int device = -1;
  if (detail::fault_in_arena(reinterpret_cast<std::uintptr_t>(pointer), &device))  // freed memory too
    return device_range_accessible(pointer, bytes);
  return pointer != nullptr;
}

std::size_t span(std::size_t width, std::size_t height, std::size_t pitch) {
  return height == 0 ? 0 : (height - 1) * pitch + width;
}

/// Whether every range `w` touches is still there; says which one is not.
bool check_node(const node_work& w, const char* library) {
  switch (w.kind) {
    case node_kind::memcpy: {
      const std::size_t d = span(w.width, w.height, w.dst_pitch), s = span(w.width, w.height, w.src_pitch);
      if (!side_ok(w.dst, d)) {
        illegal_operand(library, "cudaGraphLaunch", "a captured copy's destination", w.dst, d);
        return false;
      }
      if (!side_ok(w.src, s)) {
        illegal_operand(library, "cudaGraphLaunch", "a captured copy's source", w.src, s);
        return false;
      }
      return true;
    }
    case node_kind::memset: {
      const std::size_t d = span(w.width * w.element_size, w.height, w.dst_pitch);
      if (!device_range_accessible(w.dst, d)) {
        illegal_operand(library, "cudaGraphLaunch", "a captured memset's destination", w.dst, d);
        return false;
      }
      return true;
    }
    default: return true;
  }
}

void run_node(const node_work& w, stream* s) {
  switch (w.kind) {
    case node_kind::kernel:
      count_kernel_launch();
      tick();
      break;
    case node_kind::memcpy:
      for (std::size_t row = 0, rows = copy_moves_bytes(w.dst, w.src) ? w.height : 0; row < rows; ++row)
        std::memmove(static_cast<char*>(w.dst) + row * w.dst_pitch,
                     static_cast<const char*>(w.src) + row * w.src_pitch, w.width);
      count_memcpy(w.width * w.height);
      tick();
      break;
    case node_kind::memset:
      for (std::size_t row = 0; row < w.height; ++row) {
        char* p = static_cast<char*>(w.dst) + row * w.dst_pitch;
        if (w.element_size == 1 || w.value == 0) {
          device_memset(p, static_cast<int>(w.value & (w.element_size == 1 ? 0xffu : 0xffffffffu)),
                        w.width * w.element_size);
        } else if (w.element_size == 2) {
          auto v = static_cast<std::uint16_t>(w.value);
          for (std::size_t i = 0; i < w.width; ++i) std::memcpy(p + 2 * i, &v, 2);
        } else {
          for (std::size_t i = 0; i < w.width; ++i) std::memcpy(p + 4 * i, &w.value, 4);
        }
      }
      count_memset();
      tick();
      break;
    case node_kind::event_record: record_event(w.target, s); break;
    case node_kind::event_wait: tick(); break;  // work runs at the call: nothing to wait for
    case node_kind::host:
      tick();
      w.host_fn(w.host_data);
      break;
  }
}

}  // namespace

const char* to_string(graph_status status) noexcept {
  switch (status) {
    case graph_status::ok: return "ok";
    case graph_status::unsupported: return "not permitted while a stream captures";
    case graph_status::invalidated: return "the capture was invalidated by an earlier error";
    case graph_status::merge: return "would merge two independent captures";
    case graph_status::unmatched: return "the capture did not begin on this stream";
    case graph_status::unjoined: return "a stream forked into the capture was not joined back";
    case graph_status::isolation: return "a dependency on work outside the capture";
    case graph_status::implicit: return "the legacy stream would depend on a capturing blocking stream";
    case graph_status::captured_event: return "the event was last recorded in a capturing stream";
    case graph_status::wrong_thread: return "a non-relaxed capture ended by another thread";
    case graph_status::illegal_state: return "illegal state";
    case graph_status::invalid_value: return "invalid value";
    case graph_status::invalid_handle: return "invalid handle";
    case graph_status::illegal_address: return "illegal address";
  }
  return "?";
}

graph_status graph_nodes(graph* g, graph_node** out, std::size_t* count) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (!live_graph_locked(st, g)) return graph_status::invalid_value;
  std::vector<graph_node*> nodes;
  nodes.reserve(g->nodes.size());
  for (auto& n : g->nodes) nodes.push_back(n.get());
  return list_nodes(nodes, out, count);
}

graph_status node_dependencies(graph_node* n, graph_node** out, std::size_t* count) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (n == nullptr || !st.nodes.count(n) || n->magic != node_magic) return graph_status::invalid_value;
  return list_nodes(n->deps, out, count);
}

graph_status destroy_graph(graph* g) noexcept {
  graph_state& st = the_graph_state();
  std::unique_lock lock(st.mu);
  if (!live_graph_locked(st, g)) return graph_status::invalid_value;
  if (g->capturing) return graph_status::illegal_state;  // a capture still adds to it
  std::vector<user_object*> dead;
  delete_graph_locked(st, g, dead);
  lock.unlock();
  release_dead(dead);
  return graph_status::ok;
}

graph_status instantiate_graph(graph* g, graph_exec** out) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (!live_graph_locked(st, g)) return graph_status::invalid_value;
  if (g->capturing) return graph_status::illegal_state;
  auto* x = new graph_exec;
  x->work.reserve(g->nodes.size());
  for (auto& n : g->nodes) x->work.push_back(n->work);
  x->user_refs = g->user_refs;
  for (auto& [o, count] : x->user_refs) o->refs += count;
  st.execs.insert(x);
  *out = x;
  return graph_status::ok;
}

graph_status destroy_graph_exec(graph_exec* x) noexcept {
  graph_state& st = the_graph_state();
  std::unique_lock lock(st.mu);
  if (x == nullptr || !st.execs.count(x) || x->magic != exec_magic) return graph_status::invalid_value;
  std::vector<user_object*> dead;
  for (auto& [o, count] : x->user_refs) drop_refs_locked(st, o, count, dead);
  st.execs.erase(x);
  x->magic = 0;
  delete x;
  lock.unlock();
  release_dead(dead);
  return graph_status::ok;
}

graph_status launch_graph(graph_exec* x, stream* s, bool legacy, const char* library) noexcept {
  std::vector<node_work> work;
  {
    graph_state& st = the_graph_state();
    std::lock_guard lock(st.mu);
    if (x == nullptr || !st.execs.count(x) || x->magic != exec_magic) return graph_status::invalid_handle;
    work = x->work;
  }
  if (legacy) {
    graph_status r = check_legacy_use(stream_device(s));
    if (r != graph_status::ok) return r;
  }
  graph_status r = refuse_in_capture(s);  // a graph launched into a capture would be a child graph
  if (r != graph_status::ok) return r;
  for (const node_work& w : work) {
    if (!check_node(w, library)) return graph_status::illegal_address;
    if ((w.kind == node_kind::event_record || w.kind == node_kind::event_wait) && !valid_event(w.target))
      return graph_status::invalid_handle;
  }
  for (const node_work& w : work) run_node(w, s);
  return graph_status::ok;
}

graph_status create_user_object(void* pointer, void (*destroy)(void*), unsigned initial_refs,
                                user_object** out) noexcept {
  if (out == nullptr || destroy == nullptr || initial_refs == 0) return graph_status::invalid_value;
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  auto* o = new user_object;
  o->pointer = pointer;
  o->destroy = destroy;
  o->refs = initial_refs;
  st.user_objects.insert(o);
  *out = o;
  return graph_status::ok;
}

graph_status release_user_object(user_object* o, unsigned count) noexcept {
  graph_state& st = the_graph_state();
  std::unique_lock lock(st.mu);
  if (!live_user_object_locked(st, o) || count == 0 || count > o->refs) return graph_status::invalid_value;
  std::vector<user_object*> dead;
  drop_refs_locked(st, o, count, dead);
  lock.unlock();
  release_dead(dead);
  return graph_status::ok;
}

graph_status graph_retain_user_object(graph* g, user_object* o, unsigned count, bool move) noexcept {
  graph_state& st = the_graph_state();
  std::lock_guard lock(st.mu);
  if (!live_graph_locked(st, g) || !live_user_object_locked(st, o) || count == 0) return graph_status::invalid_value;
  if (move && count > o->refs) return graph_status::invalid_value;  // more than the caller holds
  if (!move) o->refs += count;
  g->user_refs[o] += count;
  return graph_status::ok;
}

}  // namespace simcuda
