#include "engine_registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "device_factory.hpp"
#include "fork_guard.hpp"
#include "interpose_config.hpp"
#include "last_error.hpp"
#include "phasealloc/policies/policy_registry.hpp"
#include "trace_control.hpp"

namespace phasealloc::interpose {

std::atomic<engine_registry*> engine_registry::instance_{nullptr};

engine_registry& engine_registry::make_instance() {
  static engine_registry* registry = [] {
    auto* r = new engine_registry;  // leaked on purpose: see the design note
    install_fork_guard();
    // A trace named in the configuration runs from the first use of the registry.
    const auto& config = process_config();
    if (config && !config.value().trace_pattern.empty()) {
      const std::string error = r->start_trace(config.value().trace_pattern);
      if (!error.empty()) report_error(error);
    }
    return r;
  }();
  instance_.store(registry, std::memory_order_release);
  return *registry;
}

std::vector<device_slot*> engine_registry::created() const {
  std::vector<device_slot*> out;
  for (const auto& s : slots_) {
    if (device_slot* p = s.load(std::memory_order_acquire)) out.push_back(p);
  }
  return out;
}

result<device_slot*, std::string> engine_registry::slot(int ordinal) {
  if (ordinal < 0 || ordinal >= max_devices) {
    return fmt::format("device {} is out of range (0..{})", ordinal, max_devices - 1);
  }
  if (device_slot* s = existing(ordinal)) return s;
  std::lock_guard lock(mutex_);
  if (device_slot* s = existing(ordinal)) return s;
  return create_locked(ordinal);
}

result<device_slot*, std::string> engine_registry::create_locked(int ordinal) {
  std::string& failure = failures_[static_cast<std::size_t>(ordinal)];
  if (!failure.empty()) return failure;
  const auto& config_result = process_config();
  if (!config_result) {
    failure = config_result.error();
    return failure;
  }
  const interpose_config& config = config_result.value();
  auto dev = make_device(config, ordinal);
  if (!dev) {
    failure = dev.error();
    return failure;
  }
  auto pol = make_policy(config.policy_spec);
  if (!pol) {
    failure = pol.error();
    return failure;
  }
  auto host_memory = make_host_memory(config);
  if (!host_memory) {
    failure = host_memory.error();
    return failure;
  }
  engine_options options;
  options.strict = config.strict;
  options.check_invariants = config.check_invariants;
  options.offload_host_budget_bytes = config.offload_host_budget_bytes;
  auto* s = new device_slot(ordinal, std::move(dev).value(), std::move(pol).value(), options,
                            std::move(host_memory).value(), config.host_budget_bytes);
  note_engine_made();
  if (held_[static_cast<std::size_t>(ordinal)]) s->eng->hold_device_calls(true);
  for (const int peer : peers_[static_cast<std::size_t>(ordinal)]) {
    if (const errc e = s->eng->grant_peer_access(peer); e != errc::ok) {
      report_error(fmt::format("device {}: peer access for device {}: {}: {}", ordinal, peer, to_string(e),
                               s->dev->last_failure()));
    }
  }
  if (bottom_phase_ != "unphased") s->eng->set_phase(bottom_phase_);
  for (const std::string& name : phase_stack_) s->eng->begin_phase(name);
  if (!trace_pattern_.empty()) attach_trace(*s, trace_pattern_, format_interpose_config(config));
  slots_[static_cast<std::size_t>(ordinal)].store(s, std::memory_order_release);
  return s;
}

void engine_registry::refresh_sinks() {
  // Under the registry's lock: an engine being created now reads the new listener state itself.
  std::lock_guard lock(mutex_);
  for (device_slot* s : created()) s->eng->set_trace_sink(&s->observer);
}

// --- phases --------------------------------------------------------------------------------------

std::string engine_registry::begin_phase(std::string_view name) {
  if (name.empty()) return "phase name is empty";
  std::lock_guard lock(mutex_);
  phase_stack_.emplace_back(name);
  for (device_slot* s : created()) s->eng->begin_phase(name);
  checkpoint_traces_locked();
  return {};
}

std::string engine_registry::end_phase() {
  std::lock_guard lock(mutex_);
  if (phase_stack_.empty()) {
    return fmt::format("phase_end without a matching phase_begin (current phase '{}')", bottom_phase_);
  }
  phase_stack_.pop_back();
  for (device_slot* s : created()) s->eng->end_phase();
  checkpoint_traces_locked();
  return {};
}

std::string engine_registry::hold_device_calls(int ordinal, bool held) {
  if (ordinal < 0 || ordinal >= max_devices) return "device " + std::to_string(ordinal) + " is out of range";
  std::lock_guard lock(mutex_);
  held_[static_cast<std::size_t>(ordinal)] = held;
  if (device_slot* s = existing(ordinal)) s->eng->hold_device_calls(held);
  return {};
}

std::string engine_registry::grant_peer_access(int ordinal, int peer) {
  if (ordinal < 0 || ordinal >= max_devices || peer < 0 || peer >= max_devices) {
    return fmt::format("device {} or peer {} is out of range", ordinal, peer);
  }
  std::lock_guard lock(mutex_);
  auto& peers = peers_[static_cast<std::size_t>(ordinal)];
  if (std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  if (device_slot* s = existing(ordinal)) {
    if (const errc e = s->eng->grant_peer_access(peer); e != errc::ok) {
      return fmt::format("device {}: peer access for device {}: {}: {}", ordinal, peer, to_string(e),
                         s->dev->last_failure());
    }
  }
  return {};
}

std::string engine_registry::set_phase(std::string_view name) {
  if (name.empty()) return "phase name is empty";
  std::lock_guard lock(mutex_);
  if (phase_stack_.empty()) {
    bottom_phase_ = std::string(name);
  } else {
    phase_stack_.back() = std::string(name);
  }
  for (device_slot* s : created()) s->eng->set_phase(name);
  checkpoint_traces_locked();
  return {};
}

std::string engine_registry::current_phase() const {
  std::lock_guard lock(mutex_);
  return phase_stack_.empty() ? bottom_phase_ : phase_stack_.back();
}

// --- traces --------------------------------------------------------------------------------------

std::string engine_registry::start_trace(std::string_view pattern) {
  if (pattern.empty()) return "trace path pattern is empty";
  std::lock_guard lock(mutex_);
  if (!trace_pattern_.empty()) {
    return fmt::format("a trace is already running (pattern \"{}\"); stop it first", trace_pattern_);
  }
  const auto& config = process_config();
  const std::string settings = config ? format_interpose_config(config.value()) : std::string();
  trace_pattern_ = std::string(pattern);
  for (device_slot* s : created()) attach_trace(*s, trace_pattern_, settings);
  if (!exit_flush_registered_) {
    exit_flush_registered_ = true;
    std::atexit([] { engine_registry::instance().flush_traces_at_exit(); });
  }
  if (!checkpoint_thread_started_) {
    // Checkpoints between transitions (trace_control.hpp): the registry is never destroyed, so the
    // thread may outlive main; after the exit flush its checkpoints do nothing.
    checkpoint_thread_started_ = true;
    std::thread([] {
      for (;;) {
        std::this_thread::sleep_for(quiet_checkpoint_period);
        engine_registry::instance().checkpoint_traces();
      }
    }).detach();
  }
  return {};
}

std::string engine_registry::stop_trace() {
  std::lock_guard lock(mutex_);
  if (trace_pattern_.empty()) return "no trace is running";
  trace_pattern_.clear();
  std::string errors;
  for (device_slot* s : created()) {
    const std::string error = detach_trace(*s);
    if (!error.empty()) errors += (errors.empty() ? "" : "; ") + error;
  }
  return errors;
}

bool engine_registry::tracing() const {
  std::lock_guard lock(mutex_);
  return !trace_pattern_.empty();
}

std::string engine_registry::flush_traces() {
  std::lock_guard lock(mutex_);
  std::string errors;
  if (trace_pattern_.empty()) return errors;
  for (device_slot* s : created()) {
    const std::string error = flush_trace(*s);
    if (!error.empty()) errors += (errors.empty() ? "" : "; ") + error;
  }
  return errors;
}

void engine_registry::checkpoint_traces() {
  std::lock_guard lock(mutex_);
  checkpoint_traces_locked();
}

void engine_registry::checkpoint_traces_locked() {
  if (trace_pattern_.empty() || checkpoint_failed_ || exiting_) return;
  const auto start = std::chrono::steady_clock::now();
  if (start < next_checkpoint_) return;
  for (device_slot* s : created()) {
    const std::string error = flush_trace(*s);
    if (!error.empty()) {
      checkpoint_failed_ = true;
      report_error(error + " (at a phase transition; no more checkpoints, the file is written again at exit)");
      return;
    }
  }
  // The next checkpoint waits 99 times this one's duration: writing takes at most 1% of the time.
  next_checkpoint_ = start + (std::chrono::steady_clock::now() - start) * 100;
}

void engine_registry::flush_traces_at_exit() {
  try {
    std::lock_guard lock(mutex_);
    exiting_ = true;  // no checkpoint after this one: static destructors run next
    if (trace_pattern_.empty()) return;
    for (device_slot* s : created()) {
      const std::string error = flush_trace(*s);
      if (!error.empty()) report_error(error);
    }
  } catch (...) {
    // Exiting: nothing more to do.
  }
}

}  // namespace phasealloc::interpose
