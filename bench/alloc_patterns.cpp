#include "alloc_patterns.hpp"

#include <algorithm>
#include <cstdlib>

#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc::bench {
namespace {

std::vector<allocator_choice>& chosen() {
  static std::vector<allocator_choice> choice = parse_allocators("phasealloc;pytorch;glibc");
  return choice;
}

bool& checked() {
  static bool on = false;
  return on;
}

std::uint64_t device_calls_of(const device_stats& s) {
  return static_cast<std::uint64_t>(s.num_device_alloc + s.num_device_free + s.num_device_map + s.num_device_unmap);
}

}  // namespace

// --- engine_allocator ----------------------------------------------------------------------------

std::unique_ptr<engine_allocator> engine_allocator::make(std::string_view spec, std::string& error) {
  auto made = make_policy(spec);
  if (!made) {
    error = made.error();
    return nullptr;
  }
  std::unique_ptr<engine_allocator> a(new engine_allocator());
  a->spec_ = std::string(spec);
  a->policy_ = std::move(made).value();
  a->build();
  return a;
}

engine_allocator::~engine_allocator() {
  engine_.reset();  // gives its segments back to the device before the device goes
}

void engine_allocator::build() {
  if (!policy_) {
    auto made = make_policy(spec_);  // the spec worked once; policies keep state, so a fresh one
    PHASEALLOC_CHECK(made.has_value(), "policy '{}' stopped building", spec_);
    policy_ = std::move(made).value();
  }
  const auto pools = policy_->pools();
  virtual_memory_ = std::any_of(pools.begin(), pools.end(), [](const pool_traits& p) { return p.expandable; });
  model_device_config config;
  config.capacity_bytes = 80 * gib;
  config.granularity_bytes = 2 * mib;
  config.virtual_memory = virtual_memory_;
  config.events_complete_immediately = true;
  config.cost = model_device_cost{};  // zero cost per call: only the allocator's own host time is measured
  device_ = std::make_unique<model_device>(config);
  const engine_options options{.strict = checked(), .check_invariants = checked()};
  engine_ = std::make_unique<engine>(*device_, *policy_, options);
}

void engine_allocator::fold() {
  folded_ = books();  // totals so far, this engine included
  folded_.failures = 0;  // failures_ is kept separately and survives resets
}

void engine_allocator::reset() {
  const std::uint64_t since_mark = device_calls_since_mark();
  fold();
  engine_.reset();  // its teardown gives everything back; engine stats do not count that
  device_.reset();
  policy_.reset();
  build();
  mark_calls_ = 0;
  folded_calls_since_mark_ = since_mark;
}

void engine_allocator::mark() {
  mark_calls_ = device_calls_of(engine_->stats());
  folded_calls_since_mark_ = 0;
}

std::uint64_t engine_allocator::device_calls_since_mark() const {
  return folded_calls_since_mark_ + device_calls_of(engine_->stats()) - mark_calls_;
}

alloc_books engine_allocator::books() const {
  const device_stats s = engine_->stats();
  const model_device_counters c = device_->counters();
  alloc_books b;
  b.has_device = true;
  b.peak_reserved_bytes = std::max(folded_.peak_reserved_bytes,
                                   static_cast<std::size_t>(s.reserved_bytes[stat_type::all].peak));
  b.peak_allocated_bytes = std::max(folded_.peak_allocated_bytes,
                                    static_cast<std::size_t>(s.allocated_bytes[stat_type::all].peak));
  b.device_calls = folded_.device_calls + device_calls_of(s);
  b.event_calls = folded_.event_calls + c.create_event + c.record_event + c.query_event + c.synchronize_event +
                  c.destroy_event + c.synchronize;
  b.failures = failures_;
  b.first_failure = first_failure_;
  return b;
}

std::string engine_allocator::label() const {
  return spec_ + " (engine on the model device, " + (virtual_memory_ ? "virtual memory" : "whole segments") +
         ", zero call cost)";
}

void engine_allocator::note_failure(std::size_t bytes, const alloc_error& error) {
  if (failures_++ == 0) {
    first_failure_ = std::to_string(bytes) + " bytes: " + std::string(to_string(error.code));
  }
}

// --- glibc_allocator -----------------------------------------------------------------------------

std::uintptr_t glibc_allocator::allocate(std::size_t bytes, stream_id, std::uint32_t) {
  void* p = std::malloc(bytes);
  benchmark::DoNotOptimize(p);
  if (p == nullptr) ++failures_;
  return reinterpret_cast<std::uintptr_t>(p);
}

void glibc_allocator::deallocate(std::uintptr_t addr, std::size_t) {
  void* p = reinterpret_cast<void*>(addr);
  benchmark::DoNotOptimize(p);
  std::free(p);
}

alloc_books glibc_allocator::books() const {
  alloc_books b;
  b.has_device = false;
  b.failures = failures_;
  if (failures_ != 0) b.first_failure = "malloc returned null";
  return b;
}

// --- the allocators of this run ------------------------------------------------------------------

std::vector<allocator_choice> parse_allocators(std::string_view list) {
  std::vector<allocator_choice> out;
  while (!list.empty()) {
    const std::size_t semi = list.find(';');
    const std::string_view item = list.substr(0, semi);
    list = semi == std::string_view::npos ? std::string_view{} : list.substr(semi + 1);
    if (item.empty()) continue;
    allocator_choice c;
    c.name = std::string(item);
    // Benchmark names use '/' between parts: keep the spec readable but free of it.
    std::replace(c.name.begin(), c.name.end(), '/', '_');
    if (item == "glibc") {
      c.kind = allocator_kind::glibc;
    } else if (item == "torch") {
      c.kind = allocator_kind::torch;
    } else if (item == "capi" || item.substr(0, 5) == "capi:") {
      c.kind = allocator_kind::c_entry;
      c.spec = item == "capi" ? std::string("phasealloc") : std::string(item.substr(5));
    } else {
      c.spec = std::string(item);
    }
    out.push_back(std::move(c));
  }
  return out;
}

const std::vector<allocator_choice>& chosen_allocators() { return chosen(); }
void set_chosen_allocators(std::vector<allocator_choice> choice) { chosen() = std::move(choice); }
void set_checked_engines(bool on) { checked() = on; }

}  // namespace phasealloc::bench
