// Streams and events.
//
// Note [simulated ordering]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Rationale
//   Work runs at the call (copies are real, kernels are skipped), so streams are in order by
//   construction. What an allocator depends on is *when an event says a stream's work is done*:
//   PyTorch's allocator holds a block freed on another stream until its event completes. On a GPU
//   that is later than the call; with events that complete at once, that path never runs.
// Approach
//   A global tick counts queued work (launches, copies, memsets, records). An event recorded at
//   tick t completes: at once (at_record), after t + deferred_ticks (deferred), or only when
//   synchronized (at_sync). Synchronizing a stream completes everything recorded on it; a device
//   synchronize completes every event of the device. Objects are checked by magic and by a live
//   set, so a destroyed handle is an error value, not a crash.
// Limitations
//   cudaStreamWaitEvent does not delay anything (work already ran); stream callbacks run at once.
//   Work on a capturing stream is not here: it is recorded (capture.cpp, Note [simulated capture]).
#include <chrono>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "simcuda/core.hpp"
#include "detail.hpp"

namespace simcuda {

constexpr std::uint32_t stream_magic = 0x5354524d;  // "STRM"
constexpr std::uint32_t event_magic = 0x45564e54;   // "EVNT"

struct stream {
  std::uint32_t magic = stream_magic;
  int device = 0;
  unsigned flags = 0;
  int priority = 0;
  std::uint64_t id = 0;
  std::uint64_t synced_through = 0;  ///< every event recorded at or before this tick is complete
};

struct event {
  std::uint32_t magic = event_magic;
  int device = 0;
  unsigned flags = 0;
  bool recorded = false;
  bool complete = true;
  std::uint64_t record_tick = 0;
  stream* on = nullptr;
  std::chrono::steady_clock::time_point recorded_at{};
};

namespace {

struct ordering {
  std::mutex mu;
  std::uint64_t tick = 1;
  std::uint64_t next_stream_id = 1;
  std::unordered_set<stream*> streams;
  std::unordered_set<event*> events;
  std::vector<stream*> defaults;  ///< one per device, never destroyed
};

ordering& the_ordering() {
  static ordering* o = new ordering;  // never destroyed: used during static teardown
  return *o;
}

stream* default_stream_locked(ordering& o, int device) {
  if (o.defaults.empty()) {
    for (int d = 0; d < device_count(); ++d) {
      auto* s = new stream;
      s->device = d;
      s->id = 0;
      o.defaults.push_back(s);
      o.streams.insert(s);
    }
  }
  return o.defaults.at(static_cast<std::size_t>(device));
}

bool complete_locked(ordering& o, event* e) {
  if (e->complete) return true;
  const config& c = current_config();
  bool done = e->on && e->on->synced_through >= e->record_tick;
  if (!done && c.events == event_mode::deferred) done = o.tick >= e->record_tick + c.deferred_ticks;
  if (done) e->complete = true;
  return done;
}

}  // namespace

stream* resolve_stream(const void* handle) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  auto raw = reinterpret_cast<std::uintptr_t>(handle);
  if (raw == 0 || raw == 1 || raw == 2) return default_stream_locked(o, current_device());
  auto* s = static_cast<stream*>(const_cast<void*>(handle));
  if (!o.streams.count(s) || s->magic != stream_magic) return nullptr;
  return s;
}

stream* create_stream(int device, unsigned flags, int priority) noexcept {
  if (!valid_device(device)) return nullptr;
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  default_stream_locked(o, device);
  auto* s = new stream;
  s->device = device;
  s->flags = flags;
  s->priority = priority;
  s->id = o.next_stream_id++;
  o.streams.insert(s);
  return s;
}

bool destroy_stream(stream* s) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  if (!o.streams.count(s) || s->id == 0) return false;  // unknown, or a default stream
  for (event* e : o.events)
    if (e->on == s) {
      complete_locked(o, e);
      e->complete = true;  // CUDA: work on a destroyed stream still finishes
      e->on = nullptr;
    }
  o.streams.erase(s);
  s->magic = 0;
  delete s;
  return true;
}

int stream_device(const stream* s) noexcept { return s->device; }
unsigned stream_flags(const stream* s) noexcept { return s->flags; }
int stream_priority(const stream* s) noexcept { return s->priority; }
std::uint64_t stream_id(const stream* s) noexcept { return s->id; }

void tick() noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  ++o.tick;
}

event* create_event(int device, unsigned flags) noexcept {
  if (!valid_device(device)) return nullptr;
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  auto* e = new event;
  e->device = device;
  e->flags = flags;
  o.events.insert(e);
  return e;
}

bool valid_event(const event* e) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  return o.events.count(const_cast<event*>(e)) && e->magic == event_magic;
}

bool destroy_event(event* e) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  if (!o.events.erase(e)) return false;
  detail::forget_event(e);  // the address may come back as a new event: no stale capture marker
  e->magic = 0;
  delete e;
  return true;
}

int event_device(const event* e) noexcept { return e->device; }
unsigned event_flags(const event* e) noexcept { return e->flags; }

void record_event(event* e, stream* s) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  ++o.tick;
  e->recorded = true;
  e->on = s;
  e->record_tick = o.tick;
  e->recorded_at = std::chrono::steady_clock::now();
  e->complete = current_config().events == event_mode::at_record;
}

bool query_event(event* e) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  return complete_locked(o, e);
}

void synchronize_event(event* e) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  if (e->on && e->on->synced_through < e->record_tick) e->on->synced_through = e->record_tick;
  e->complete = true;
}

void synchronize_stream(stream* s) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  s->synced_through = o.tick;
}

bool query_stream(stream* s) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  for (event* e : o.events)
    if (e->on == s && !complete_locked(o, e)) return false;
  return true;
}

void synchronize_device(int device) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  for (stream* s : o.streams)
    if (device < 0 || s->device == device) s->synced_through = o.tick;
}

bool elapsed_ms(event* start, event* end, float* ms) noexcept {
  ordering& o = the_ordering();
  std::lock_guard lock(o.mu);
  if (!start->recorded || !end->recorded || !complete_locked(o, start) || !complete_locked(o, end)) return false;
  *ms = std::chrono::duration<float, std::milli>(end->recorded_at - start->recorded_at).count();
  return true;
}

}  // namespace simcuda
