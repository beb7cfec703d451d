// model_device: the simulated GPU. See the header for what it models.
//
// Every public call has the same shape: lock, count the call, charge its modelled cost, take an
// injected fault if one is due, check the preconditions of device.hpp, then change the books.
// A call that answers an error changes nothing but the counters. finish() drops the lock and,
// with cost.spin, busy-waits what the call charged, so concurrent callers overlap like they
// would on a driver that does not hold our lock.
#include "phasealloc/devices/model_device.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <utility>

namespace phasealloc {

namespace {

std::size_t index_of(model_device_call which) noexcept { return static_cast<std::size_t>(which); }
static_assert(static_cast<std::size_t>(model_device_call::restore) + 1 == model_device_call_count,
              "model_device_call_count is stale");

// Interval set of mapped runs, start -> end (exclusive); runs are disjoint and never adjacent.
using run_map = std::map<device_address, device_address>;

/// true when some run meets [begin, end).
bool overlaps(const run_map& runs, device_address begin, device_address end) noexcept {
  auto it = runs.upper_bound(begin);
  if (it != runs.begin() && std::prev(it)->second > begin) return true;
  return it != runs.end() && it->first < end;
}

/// true when one run holds all of [begin, end) (runs are merged, so one is enough).
bool covered(const run_map& runs, device_address begin, device_address end) noexcept {
  auto it = runs.upper_bound(begin);
  if (it == runs.begin()) return false;
  return std::prev(it)->second >= end;
}

/// Adds [begin, end), which overlaps no run, merging with its neighbours.
void insert_run(run_map& runs, device_address begin, device_address end) {
  auto next = runs.lower_bound(begin);
  if (next != runs.begin()) {
    auto prev = std::prev(next);
    if (prev->second == begin) {
      begin = prev->first;
      runs.erase(prev);
    }
  }
  if (next != runs.end() && next->first == end) {
    end = next->second;
    runs.erase(next);
  }
  runs.emplace(begin, end);
}

/// Removes [begin, end), which covered() says lies in one run, splitting that run.
void erase_run(run_map& runs, device_address begin, device_address end) {
  auto it = std::prev(runs.upper_bound(begin));
  const device_address run_begin = it->first;
  const device_address run_end = it->second;
  runs.erase(it);
  if (run_begin < begin) runs.emplace(run_begin, begin);
  if (end < run_end) runs.emplace(end, run_end);
}

}  // namespace

model_device::model_device(model_device_config config)
    : config_(config),
      caps_{.granularity_bytes = config.granularity_bytes,
            .capacity_bytes = config.capacity_bytes,
            .has_virtual_reserve = config.virtual_memory,
            .has_partial_unmap = config.virtual_memory,
            .has_host_backing = config.virtual_memory && config.host_backing},
      free_ranges_() {
  PHASEALLOC_CHECK(config.granularity_bytes > 0, "model_device_config::granularity_bytes must be positive");
  PHASEALLOC_CHECK(config.granularity_bytes <= config.address_base,
                   "model_device_config::granularity_bytes {} is absurd",
                   config.granularity_bytes);
  PHASEALLOC_CHECK(config.address_window_bytes <= ~device_address{0} - config.address_base,
                   "model_device_config: the address window [{:#x}, +{:#x}) wraps around", config.address_base,
                   config.address_window_bytes);
  const device_address bottom = round_up(config.address_base, config.granularity_bytes);
  const device_address top = (config.address_base + config.address_window_bytes) / config.granularity_bytes *
                             config.granularity_bytes;
  if (top > bottom) free_ranges_.emplace(bottom, top - bottom);
}

// --- helpers (mutex_ held) ----------------------------------------------------------------------

void model_device::charge(std::uint64_t ns) noexcept {
  modeled_time_ns_ += ns;
  if (config_.cost.spin) pending_spin_ns_ += ns;
}

void model_device::finish(std::unique_lock<std::mutex>& lock) noexcept {
  const std::uint64_t spin_ns = std::exchange(pending_spin_ns_, 0);
  lock.unlock();
  if (spin_ns == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

bool model_device::take_fault(model_device_call which, errc& code) noexcept {
  auto& fault = faults_[index_of(which)];
  if (!fault) return false;
  if (fault->calls_left > 0) {
    --fault->calls_left;
    return false;
  }
  code = fault->code;
  fault.reset();
  return true;
}

errc model_device::fail(errc code) noexcept {
  ++counters_.failed;
  return code;
}

const model_device::reservation* model_device::find_range(device_address addr, std::size_t bytes) const noexcept {
  if (bytes == 0 || addr + bytes < addr) return nullptr;
  auto it = reservations_.upper_bound(addr);
  if (it == reservations_.begin()) return nullptr;
  --it;
  if (addr + bytes > it->first + it->second.size_bytes) return nullptr;
  return &it->second;
}

model_device::reservation* model_device::find_range(device_address addr, std::size_t bytes) noexcept {
  return const_cast<reservation*>(std::as_const(*this).find_range(addr, bytes));
}

bool model_device::event_complete(const event_state& e) const noexcept {
  if (e.seq == 0) return true;  // never recorded: complete, as cudaEventQuery answers
  const auto it = streams_.find(e.stream);
  return it != streams_.end() && it->second.completed_seq >= e.seq;
}

void model_device::complete_all_locked() noexcept {
  for (auto& [stream, state] : streams_) state.completed_seq = state.recorded_seq;
}

// --- address space and memory -------------------------------------------------------------------

std::optional<device_address> model_device::take_address_range(std::size_t bytes) noexcept {
  for (auto it = free_ranges_.rbegin(); it != free_ranges_.rend(); ++it) {
    if (it->second < bytes) continue;
    const device_address start = it->first;
    const device_address length = it->second;
    free_ranges_.erase(std::next(it).base());
    if (length > bytes) free_ranges_.emplace(start, length - bytes);
    return start + length - bytes;
  }
  return std::nullopt;
}

void model_device::give_address_range(device_address start, std::size_t bytes) noexcept {
  device_address length = bytes;
  auto next = free_ranges_.lower_bound(start);
  if (next != free_ranges_.end() && start + length == next->first) {
    length += next->second;
    next = free_ranges_.erase(next);
  }
  if (next != free_ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      prev->second += length;
      return;
    }
  }
  free_ranges_.emplace(start, length);
}

result<device_address> model_device::reserve(std::size_t bytes) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.reserve;
  charge(config_.cost.reserve_ns);
  const result<device_address> r = [&]() -> result<device_address> {
    errc code{};
    if (take_fault(model_device_call::reserve, code)) return fail(code);
    if (bytes == 0 || !aligned(bytes)) return fail(errc::invalid_argument);
    // Without virtual memory a reservation is memory too, so it counts against the capacity.
    if (!config_.virtual_memory && bytes > config_.capacity_bytes - mapped_bytes_) return fail(errc::out_of_memory);
    // Top-down, the highest free range that fits, as the driver places cudaMalloc.
    const std::optional<device_address> taken = take_address_range(bytes);
    if (!taken) return fail(errc::out_of_memory);
    const device_address base = *taken;
    reservation res;
    res.size_bytes = bytes;
    if (!config_.virtual_memory) {
      res.mapped_bytes = bytes;
      mapped_bytes_ += bytes;
    }
    reservations_.emplace(base, std::move(res));
    reserved_bytes_ += bytes;
    return base;
  }();
  finish(lock);
  return r;
}

errc model_device::release(device_address base, std::size_t bytes) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.release;
  charge(config_.cost.release_ns);
  const errc r = [&] {
    errc code{};
    if (take_fault(model_device_call::release, code)) return fail(code);
    const auto it = reservations_.find(base);
    if (it == reservations_.end() || it->second.size_bytes != bytes) return fail(errc::invalid_argument);
    if (config_.virtual_memory) {
      if (it->second.mapped_bytes != 0) return fail(errc::invalid_argument);
    } else {
      mapped_bytes_ -= bytes;
    }
    reserved_bytes_ -= bytes;
    reservations_.erase(it);
    give_address_range(base, bytes);
    return errc::ok;
  }();
  finish(lock);
  return r;
}

errc model_device::map(device_address addr, std::size_t bytes) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.map;
  charge(config_.cost.map_ns);
  const errc r = [&] {
    if (!config_.virtual_memory) return fail(errc::not_supported);
    errc code{};
    if (take_fault(model_device_call::map, code)) return fail(code);
    if (bytes == 0 || !aligned(addr) || !aligned(bytes)) return fail(errc::invalid_argument);
    reservation* res = find_range(addr, bytes);
    if (res == nullptr) return fail(errc::invalid_argument);
    if (overlaps(res->mapped_runs, addr, addr + bytes)) return fail(errc::invalid_argument);  // mapped already
    if (bytes > config_.capacity_bytes - mapped_bytes_) return fail(errc::out_of_memory);
    insert_run(res->mapped_runs, addr, addr + bytes);
    res->mapped_bytes += bytes;
    mapped_bytes_ += bytes;
    charge(config_.cost.map_granule_ns * (bytes / caps_.granularity_bytes));
    return errc::ok;
  }();
  finish(lock);
  return r;
}

errc model_device::unmap(device_address addr, std::size_t bytes) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.unmap;
  charge(config_.cost.unmap_ns);
  const errc r = [&] {
    if (!config_.virtual_memory) return fail(errc::not_supported);
    errc code{};
    if (take_fault(model_device_call::unmap, code)) return fail(code);
    if (bytes == 0 || !aligned(addr) || !aligned(bytes)) return fail(errc::invalid_argument);
    reservation* res = find_range(addr, bytes);
    if (res == nullptr) return fail(errc::invalid_argument);
    if (!covered(res->mapped_runs, addr, addr + bytes)) return fail(errc::invalid_argument);  // not all mapped
    const auto run = host_runs_.find(addr);
    const bool host_run = run != host_runs_.end() && run->second == bytes;  // an offloaded range, whole
    if (!host_run && overlaps_host_run(addr, bytes)) return fail(errc::invalid_argument);
    erase_run(res->mapped_runs, addr, addr + bytes);
    res->mapped_bytes -= bytes;
    if (host_run) {
      host_runs_.erase(run);
      host_bytes_ -= bytes;
    } else {
      mapped_bytes_ -= bytes;
    }
    charge(config_.cost.unmap_granule_ns * (bytes / caps_.granularity_bytes));
    return errc::ok;
  }();
  finish(lock);
  return r;
}

std::size_t model_device::free_bytes() const noexcept {
  std::lock_guard lock(mutex_);
  return config_.capacity_bytes > mapped_bytes_ ? config_.capacity_bytes - mapped_bytes_ : 0;
}

// --- same-address offload ----------------------------------------------------------------------

bool model_device::overlaps_host_run(device_address addr, std::size_t bytes) const noexcept {
  auto it = host_runs_.lower_bound(addr + bytes);
  if (it == host_runs_.begin()) return false;
  --it;
  return it->first + it->second > addr;
}

bool model_device::valid_moves(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                               std::span<const event_id> after) const noexcept {
  if (!ranges_inside(live, addr, bytes)) return false;
  for (const event_id e : after) {
    if (!events_.contains(e)) return false;
  }
  return true;
}


errc model_device::offload(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                           std::span<const event_id> after) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.offload;
  const errc r = [&] {
    if (!caps_.has_host_backing) return fail(errc::not_supported);
    errc code{};
    if (take_fault(model_device_call::offload, code)) return fail(code);
    if (bytes == 0 || !aligned(addr) || !aligned(bytes)) return fail(errc::invalid_argument);
    const reservation* res = find_range(addr, bytes);
    if (res == nullptr || !covered(res->mapped_runs, addr, addr + bytes) || overlaps_host_run(addr, bytes) ||
        !valid_moves(addr, bytes, live, after)) {
      return fail(errc::invalid_argument);
    }
    host_runs_.emplace(addr, bytes);
    host_bytes_ += bytes;
    mapped_bytes_ -= bytes;
    moved_.to_host += total_bytes(live);
    return errc::ok;
  }();
  finish(lock);
  return r;
}

errc model_device::restore(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                           std::span<const event_id> after) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.restore;
  const errc r = [&] {
    if (!caps_.has_host_backing) return fail(errc::not_supported);
    errc code{};
    if (take_fault(model_device_call::restore, code)) return fail(code);
    const auto run = host_runs_.find(addr);
    if (run == host_runs_.end() || run->second != bytes || !valid_moves(addr, bytes, live, after)) {
      return fail(errc::invalid_argument);
    }
    if (bytes > config_.capacity_bytes - mapped_bytes_) return fail(errc::out_of_memory);  // still on the host
    host_runs_.erase(run);
    host_bytes_ -= bytes;
    mapped_bytes_ += bytes;
    moved_.to_device += total_bytes(live);
    return errc::ok;
  }();
  finish(lock);
  return r;
}

std::size_t model_device::host_backed_bytes() const noexcept {
  std::lock_guard lock(mutex_);
  return host_bytes_;
}

device::moved_bytes model_device::moved() const noexcept {
  std::lock_guard lock(mutex_);
  return moved_;
}

// --- streams and events -------------------------------------------------------------------------

result<event_id> model_device::create_event() noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.create_event;
  charge(config_.cost.event_ns);
  const result<event_id> r = [&]() -> result<event_id> {
    errc code{};
    if (take_fault(model_device_call::create_event, code)) return fail(code);
    const event_id id = next_event_++;
    events_.emplace(id, event_state{});
    return id;
  }();
  finish(lock);
  return r;
}

errc model_device::record_event(event_id event, stream_id stream) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.record_event;
  charge(config_.cost.event_ns);
  const errc r = [&] {
    errc code{};
    if (take_fault(model_device_call::record_event, code)) return fail(code);
    const auto it = events_.find(event);
    if (it == events_.end()) return fail(errc::invalid_argument);
    const std::uint64_t seq = next_seq_++;
    it->second = event_state{.stream = stream, .seq = seq};
    stream_state& s = streams_[stream];
    s.recorded_seq = seq;
    if (config_.events_complete_immediately) s.completed_seq = seq;
    return errc::ok;
  }();
  finish(lock);
  return r;
}

result<bool> model_device::query_event(event_id event) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.query_event;
  charge(config_.cost.event_ns);
  const result<bool> r = [&]() -> result<bool> {
    errc code{};
    if (take_fault(model_device_call::query_event, code)) return fail(code);
    const auto it = events_.find(event);
    if (it == events_.end()) return fail(errc::invalid_argument);
    return event_complete(it->second);
  }();
  finish(lock);
  return r;
}

errc model_device::synchronize_event(event_id event) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.synchronize_event;
  charge(config_.cost.sync_ns);
  const errc r = [&] {
    errc code{};
    if (take_fault(model_device_call::synchronize_event, code)) return fail(code);
    const auto it = events_.find(event);
    if (it == events_.end()) return fail(errc::invalid_argument);
    const event_state& e = it->second;
    if (e.seq != 0) {
      // Streams run in order: waiting for this record means everything before it ran too.
      stream_state& s = streams_[e.stream];
      s.completed_seq = std::max(s.completed_seq, e.seq);
    }
    return errc::ok;
  }();
  finish(lock);
  return r;
}

void model_device::destroy_event(event_id event) noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.destroy_event;
  charge(config_.cost.event_ns);
  if (events_.erase(event) == 0) ++counters_.failed;  // unknown event: counted, nothing to answer
  finish(lock);
}

errc model_device::synchronize() noexcept {
  std::unique_lock lock(mutex_);
  ++counters_.synchronize;
  charge(config_.cost.sync_ns);
  const errc r = [&] {
    errc code{};
    if (take_fault(model_device_call::synchronize, code)) return fail(code);
    complete_all_locked();
    return errc::ok;
  }();
  finish(lock);
  return r;
}

// --- model device only -----------------------------------------------------------------------------------

void model_device::complete_events(stream_id stream) noexcept {
  std::lock_guard lock(mutex_);
  const auto it = streams_.find(stream);
  if (it != streams_.end()) it->second.completed_seq = it->second.recorded_seq;
}

void model_device::complete_all_events() noexcept {
  std::lock_guard lock(mutex_);
  complete_all_locked();
}

std::size_t model_device::incomplete_events() const noexcept {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(
      std::count_if(events_.begin(), events_.end(), [this](const auto& e) { return !event_complete(e.second); }));
}

std::size_t model_device::live_events() const noexcept {
  std::lock_guard lock(mutex_);
  return events_.size();
}

void model_device::fail_next(model_device_call which, errc code, unsigned after_n_calls) noexcept {
  PHASEALLOC_CHECK(code != errc::ok, "fail_next needs an error code");
  std::lock_guard lock(mutex_);
  faults_[index_of(which)] = pending_fault{.code = code, .calls_left = after_n_calls};
}

void model_device::clear_faults() noexcept {
  std::lock_guard lock(mutex_);
  faults_.fill(std::nullopt);
}

model_device_counters model_device::counters() const noexcept {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::uint64_t model_device::modeled_time_ns() const noexcept {
  std::lock_guard lock(mutex_);
  return modeled_time_ns_;
}

void model_device::reset_counters() noexcept {
  std::lock_guard lock(mutex_);
  counters_ = {};
  modeled_time_ns_ = 0;
}

std::size_t model_device::mapped_bytes() const noexcept {
  std::lock_guard lock(mutex_);
  return mapped_bytes_;
}

std::size_t model_device::reserved_bytes() const noexcept {
  std::lock_guard lock(mutex_);
  return reserved_bytes_;
}

std::size_t model_device::live_reservations() const noexcept {
  std::lock_guard lock(mutex_);
  return reservations_.size();
}

bool model_device::is_mapped(device_address addr, std::size_t bytes) const noexcept {
  std::lock_guard lock(mutex_);
  if (!aligned(addr) || !aligned(bytes)) return false;
  const reservation* res = find_range(addr, bytes);
  if (res == nullptr) return false;
  return !config_.virtual_memory || covered(res->mapped_runs, addr, addr + bytes);
}

}  // namespace phasealloc
