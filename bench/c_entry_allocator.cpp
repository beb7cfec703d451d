// phasealloc's C entry point as a bench allocator (device_allocators.hpp).
#include <sys/types.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "device_allocators.hpp"
#include "phasealloc_c_api.h"

namespace phasealloc::bench {
namespace {

struct c_entry_stats {
  std::size_t peak_reserved_bytes = 0;
  std::size_t peak_allocated_bytes = 0;
  std::uint64_t device_calls = 0;
};

c_entry_stats read_stats() {
  c_entry_stats out;
  const char* text = phasealloc_stats_json(0);
  if (text == nullptr) return out;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  const auto get = [&](const char* key) { return j.value(key, std::int64_t{0}); };
  out.peak_reserved_bytes = static_cast<std::size_t>(get("reserved_bytes.all.peak"));
  out.peak_allocated_bytes = static_cast<std::size_t>(get("allocated_bytes.all.peak"));
  out.device_calls = static_cast<std::uint64_t>(get("num_device_alloc") + get("num_device_free") +
                                                get("num_device_map") + get("num_device_unmap"));
  return out;
}

std::string last_error() {
  const char* e = phasealloc_last_error();
  return e != nullptr && *e != '\0' ? e : "no error text";
}

}  // namespace

std::unique_ptr<c_entry_allocator> c_entry_allocator::make(std::string_view spec, std::string& error) {
  const std::string conf = "policy:[" + std::string(spec) + "]";  // PHASEALLOC_CONF's grammar
  if (phasealloc_configure(conf.c_str()) != 0) {
    error = "phasealloc_configure(\"" + conf + "\"): " + last_error();
    return nullptr;
  }
  phasealloc_init(1);
  std::unique_ptr<c_entry_allocator> out(new c_entry_allocator());
  out->spec_ = std::string(spec);
  out->clear();  // the process's allocator served earlier benchmarks: none of that counts here
  return out;
}

c_entry_allocator::~c_entry_allocator() { phasealloc_reset(); }

std::uintptr_t c_entry_allocator::allocate(std::size_t bytes, stream_id stream, std::uint32_t /*tag*/) {
  try {
    // phasealloc_malloc, as CUDAPluggableAllocator calls it (it throws on failure).
    if (void* p = phasealloc_malloc(static_cast<ssize_t>(bytes), 0, cuda_stream_for(stream))) [[likely]] {
      return reinterpret_cast<std::uintptr_t>(p);
    }
    note_failure(std::to_string(bytes) + " bytes: NULL");
  } catch (const std::exception& e) {
    note_failure(std::to_string(bytes) + " bytes: " + e.what());
  }
  return 0;
}

void c_entry_allocator::deallocate(std::uintptr_t addr, std::size_t bytes) {
  if (addr != 0) [[likely]] phasealloc_free(reinterpret_cast<void*>(addr), static_cast<ssize_t>(bytes), 0, nullptr);
}

void c_entry_allocator::record_stream(std::uintptr_t addr, stream_id stream) {
  if (addr != 0) phasealloc_record_stream(reinterpret_cast<void*>(addr), cuda_stream_for(stream));
}

void c_entry_allocator::set_phase(std::string_view name) {
  const std::string n(name);
  if (phasealloc_phase_set(n.c_str()) != 0) note_failure("phasealloc_phase_set(\"" + n + "\"): " + last_error());
}

void c_entry_allocator::reset() {
  const c_entry_stats s = read_stats();
  folded_peak_reserved_ = std::max(folded_peak_reserved_, s.peak_reserved_bytes);
  folded_peak_allocated_ = std::max(folded_peak_allocated_, s.peak_allocated_bytes);
  clear();
}

void c_entry_allocator::clear() {
  phasealloc_reset();
  (void)phasealloc_reset_peak_stats(0);
}

void c_entry_allocator::mark() { mark_calls_ = read_stats().device_calls; }

std::uint64_t c_entry_allocator::device_calls_since_mark() const { return read_stats().device_calls - mark_calls_; }

alloc_books c_entry_allocator::books() const {
  const c_entry_stats s = read_stats();
  alloc_books b;
  b.has_device = true;
  b.peak_reserved_bytes = std::max(folded_peak_reserved_, s.peak_reserved_bytes);
  b.peak_allocated_bytes = std::max(folded_peak_allocated_, s.peak_allocated_bytes);
  b.device_calls = s.device_calls;
  b.failures = failures_;
  b.first_failure = first_failure_;
  return b;
}

std::string c_entry_allocator::label() const {
  const char* config = phasealloc_config();
  return "phasealloc C entry point (libphasealloc_torch.so, " + (config != nullptr ? std::string(config) : spec_) +
         ") on the CUDA device";
}

void c_entry_allocator::note_failure(std::string message) {
  if (failures_++ == 0) first_failure_ = std::move(message);
}

}  // namespace phasealloc::bench
