#include "phasealloc/host_pool.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "phasealloc/check.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc {
namespace {

constexpr std::size_t small_round_bytes = 4 * kib;
constexpr std::size_t large_round_bytes = 2 * mib;

std::size_t round_buffer(std::size_t bytes) {
  const std::size_t unit = bytes < large_round_bytes ? small_round_bytes : large_round_bytes;
  return (bytes + unit - 1) / unit * unit;
}

}  // namespace

host_pool::host_pool(host_memory& memory, device* events, host_pool_options options)
    : memory_(memory), events_(events), options_(options) {
  stats_.budget_bytes = options_.budget_bytes;
}

host_pool::~host_pool() {
  std::lock_guard lock(mutex_);
  if (events_ != nullptr) {
    for (void* p : pending_) (void)events_->synchronize_event(buffers_.at(p).event);
  }
  for (void* p : pending_) spare_events_.push_back(buffers_.at(p).event);
  pending_.clear();
  for (auto& [ptr, info] : buffers_) (void)memory_.free(ptr, info.bytes);
  buffers_.clear();
  if (events_ != nullptr) {
    for (event_id e : spare_events_) events_->destroy_event(e);
  }
}

void* host_pool::find_idle(std::size_t rounded) const {
  void* best = nullptr;
  const buffer_info* best_info = nullptr;
  for (const auto& [ptr, info] : buffers_) {
    if (info.st != state::idle || info.bytes < rounded || info.bytes - rounded > rounded / 8) continue;
    if (best_info == nullptr || info.bytes < best_info->bytes ||
        (info.bytes == best_info->bytes && info.released < best_info->released)) {
      best = ptr;
      best_info = &info;
    }
  }
  return best;
}

void host_pool::collect_pending() {
  std::erase_if(pending_, [&](void* p) {
    buffer_info& info = buffers_.at(p);
    const result<bool> done = events_->query_event(info.event);
    // A query that fails says nothing: keep waiting (a later synchronize decides).
    if (!done || !done.value()) return false;
    spare_events_.push_back(info.event);
    info.event = 0;
    info.st = state::idle;
    return true;
  });
}

void* host_pool::wait_pending_fit(std::size_t rounded) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    buffer_info& info = buffers_.at(*it);
    if (info.bytes < rounded || info.bytes - rounded > rounded / 8) continue;
    if (events_->synchronize_event(info.event) != errc::ok) return nullptr;
    ++stats_.num_waits;
    void* p = *it;
    spare_events_.push_back(info.event);
    info.event = 0;
    info.st = state::idle;
    pending_.erase(it);
    return p;
  }
  return nullptr;
}

bool host_pool::wait_oldest_pending() {
  if (pending_.empty()) return false;
  void* p = pending_.front();
  buffer_info& info = buffers_.at(p);
  if (events_->synchronize_event(info.event) != errc::ok) return false;
  ++stats_.num_waits;
  spare_events_.push_back(info.event);
  info.event = 0;
  info.st = state::idle;
  pending_.erase(pending_.begin());
  return true;
}

bool host_pool::free_oldest_idle() {
  auto oldest = buffers_.end();
  for (auto it = buffers_.begin(); it != buffers_.end(); ++it) {
    if (it->second.st == state::idle && (oldest == buffers_.end() || it->second.released < oldest->second.released)) {
      oldest = it;
    }
  }
  if (oldest == buffers_.end()) return false;
  free_buffer(oldest->first);
  return true;
}

void host_pool::free_buffer(void* ptr) {
  const auto it = buffers_.find(ptr);
  PHASEALLOC_ASSERT(it != buffers_.end() && it->second.st == state::idle, "host_pool frees a buffer it does not hold idle");
  const std::size_t bytes = it->second.bytes;
  const errc freed = memory_.free(ptr, bytes);
  // The memory is gone from the pool's books either way: a failed free leaks it rather than
  // handing a buffer in an unknown state out again.
  PHASEALLOC_CHECK(freed == errc::ok || freed == errc::device_refused, "host_memory::free answered {}",
                   to_string(freed));
  buffers_.erase(it);
  ++stats_.num_host_free;
  stats_.allocations.decrease(1);
  stats_.allocated_bytes.decrease(static_cast<std::int64_t>(bytes));
}

result<host_buffer, host_pool_error> host_pool::acquire(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (bytes == 0 || round_buffer(bytes) > options_.budget_bytes) {
    return host_pool_error{host_pool_errc::invalid_request,
                           fmt::format("host buffer of {} bytes: the budget is {} bytes", bytes, options_.budget_bytes)};
  }
  const std::size_t rounded = round_buffer(bytes);
  if (events_ != nullptr && !pending_.empty()) collect_pending();

  const auto hand_out = [&](void* ptr) {
    buffer_info& info = buffers_.at(ptr);
    info.st = state::active;
    stats_.active_requests.increase(1);
    stats_.active_bytes.increase(static_cast<std::int64_t>(info.bytes));
    return host_buffer{ptr, info.bytes};
  };
  if (void* p = find_idle(rounded)) {
    ++stats_.num_reuses;
    return hand_out(p);
  }
  // A miss: make room under the budget, idle buffers first (a copy in flight is worth waiting
  // for only when nothing idle is left), then allocate.
  const auto held = [&] { return static_cast<std::size_t>(stats_.allocated_bytes.current); };
  if (held() + rounded > options_.budget_bytes && events_ != nullptr) {
    // At the budget, a copy in flight into a buffer that fits is worth waiting for: it ends
    // soon, while freeing and allocating costs a cudaHostAlloc and may evict a buffer the next
    // request needs.
    if (void* p = wait_pending_fit(rounded)) {
      ++stats_.num_reuses;
      return hand_out(p);
    }
  }
  while (held() + rounded > options_.budget_bytes) {
    if (free_oldest_idle()) continue;
    if (events_ != nullptr && wait_oldest_pending()) {
      if (void* p = find_idle(rounded)) {
        ++stats_.num_reuses;
        return hand_out(p);
      }
      continue;
    }
    ++stats_.num_over_budget;
    return host_pool_error{
        host_pool_errc::over_budget,
        fmt::format("host buffer of {} bytes: {} of the {}-byte budget are in {} active buffers", bytes,
                    stats_.active_bytes.current, options_.budget_bytes, stats_.active_requests.current)};
  }
  result<void*> memory = memory_.allocate(rounded);
  if (!memory) {
    // The host may be short of lockable memory: give back what is idle and try once more.
    while (free_oldest_idle()) {
    }
    memory = memory_.allocate(rounded);
  }
  if (!memory) {
    const std::string why = memory_.last_failure();
    return host_pool_error{host_pool_errc::host_refused,
                           fmt::format("host buffer of {} bytes: {} refused ({}{}{})", bytes, memory_.name(),
                                       to_string(memory.error()), why.empty() ? "" : ": ", why)};
  }
  ++stats_.num_host_alloc;
  stats_.allocations.increase(1);
  stats_.allocated_bytes.increase(static_cast<std::int64_t>(rounded));
  buffers_.emplace(memory.value(), buffer_info{rounded, state::idle, 0, 0});
  return hand_out(memory.value());
}

errc host_pool::release(void* ptr, stream_id stream, bool record) {
  std::lock_guard lock(mutex_);
  const auto it = buffers_.find(ptr);
  if (it == buffers_.end()) return errc::unknown_pointer;
  buffer_info& info = it->second;
  if (info.st != state::active) return errc::double_free;
  stats_.active_requests.decrease(1);
  stats_.active_bytes.decrease(static_cast<std::int64_t>(info.bytes));
  info.released = ++release_clock_;
  info.st = state::idle;
  if (!record || events_ == nullptr) return errc::ok;
  event_id event = 0;
  if (!spare_events_.empty()) {
    event = spare_events_.back();
    spare_events_.pop_back();
  } else if (result<event_id> created = events_->create_event()) {
    event = created.value();
  }
  if (event == 0 || events_->record_event(event, stream) != errc::ok) {
    // No event to wait on: wait for the stream's work now, so reuse stays safe.
    if (event != 0) spare_events_.push_back(event);
    (void)events_->synchronize();
    return errc::ok;
  }
  info.event = event;
  info.st = state::pending;
  pending_.push_back(ptr);
  return errc::ok;
}

std::size_t host_pool::trim(std::size_t keep_bytes) {
  std::lock_guard lock(mutex_);
  if (events_ != nullptr && !pending_.empty()) collect_pending();
  std::size_t freed = 0;
  while (static_cast<std::size_t>(stats_.allocated_bytes.current) > keep_bytes) {
    const auto before = stats_.allocated_bytes.current;
    if (!free_oldest_idle()) break;
    freed += static_cast<std::size_t>(before - stats_.allocated_bytes.current);
  }
  return freed;
}

host_pool_stats host_pool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace phasealloc

namespace phasealloc {

void host_pool::reset_peak_stats() {
  std::lock_guard lock(mutex_);
  for (stat* s : {&stats_.allocations, &stats_.allocated_bytes, &stats_.active_requests, &stats_.active_bytes}) {
    s->reset_peak();
  }
}

void host_pool::reset_accumulated_stats() {
  std::lock_guard lock(mutex_);
  for (stat* s : {&stats_.allocations, &stats_.allocated_bytes, &stats_.active_requests, &stats_.active_bytes}) {
    s->reset_accumulated();
  }
  stats_.num_host_alloc = stats_.num_host_free = 0;
  stats_.num_reuses = stats_.num_waits = stats_.num_over_budget = 0;
}

}  // namespace phasealloc
