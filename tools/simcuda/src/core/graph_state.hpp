// Private to the core: the objects of stream capture and graphs, shared by capture.cpp (capture
// sequences) and graphs.cpp (graphs, executable graphs, user objects) under one mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "simcuda/core.hpp"

namespace simcuda {

constexpr std::uint32_t graph_magic = 0x47525048;        // "GRPH"
constexpr std::uint32_t node_magic = 0x4e4f4445;         // "NODE"
constexpr std::uint32_t exec_magic = 0x47455845;         // "GEXE"
constexpr std::uint32_t user_object_magic = 0x5553524f;  // "USRO"

struct graph_node {
  std::uint32_t magic = node_magic;
  graph* owner = nullptr;
  node_work work;
  std::vector<graph_node*> deps;
};

struct graph {
  std::uint32_t magic = graph_magic;
  std::vector<std::unique_ptr<graph_node>> nodes;  ///< creation order is a topological order
  std::map<user_object*, unsigned> user_refs;
  bool capturing = false;  ///< a capture is adding to it
};

struct graph_exec {
  std::uint32_t magic = exec_magic;
  std::vector<node_work> work;  ///< the graph's nodes, in order
  std::map<user_object*, unsigned> user_refs;
};

struct user_object {
  std::uint32_t magic = user_object_magic;
  void* pointer = nullptr;
  void (*destroy)(void*) = nullptr;
  unsigned refs = 0;
};

namespace detail {

struct capture;

/// A stream's part in a capture: the nodes its next work depends on.
struct membership {
  capture* in = nullptr;
  std::vector<graph_node*> deps;
  std::vector<graph_node*> published;  ///< what stream_capture_info last handed out
};

/// Where an event was last recorded inside a capture (`in` null once that capture ended).
struct captured_event {
  capture* in = nullptr;
  std::uint64_t capture_id = 0;
  std::vector<graph_node*> deps;
};

struct graph_state {
  std::mutex mu;
  std::unordered_set<graph*> graphs;
  std::unordered_set<graph_node*> nodes;
  std::unordered_set<graph_exec*> execs;
  std::unordered_set<user_object*> user_objects;
  std::unordered_map<stream*, membership> members;
  std::unordered_map<const event*, captured_event> captured_events;
  std::unordered_set<capture*> captures;
  std::uint64_t next_capture_id = 1;
};

graph_state& the_graph_state();

/// Appends a node to `g` (the caller holds the lock).
graph_node* add_node_locked(graph_state& st, graph* g, const node_work& work, const std::vector<graph_node*>& deps);
/// Deletes `g` and its nodes; the user objects whose last reference went are appended to `dead`
/// (their destructors run after the lock is released: release_dead()).
void delete_graph_locked(graph_state& st, graph* g, std::vector<user_object*>& dead);
/// Drops `count` references of `o`; appends it to `dead` at zero.
void drop_refs_locked(graph_state& st, user_object* o, unsigned count, std::vector<user_object*>& dead);
/// Runs the destructors of user objects whose last reference went (without the lock).
void release_dead(std::vector<user_object*>& dead) noexcept;
}  // namespace detail
}  // namespace simcuda
