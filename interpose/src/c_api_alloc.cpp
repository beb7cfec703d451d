// The entry points PyTorch's CUDAPluggableAllocator calls: malloc, free and the optional hooks.
//
// Design note
// Rationale: these run on every tensor allocation and free, on any thread, and must never take the
//   process down: misuse is reported and counted (aborting only under strict:true), and nothing
//   crosses the C boundary except the allocation failure phasealloc_malloc must throw (PyTorch
//   does not check for NULL; see allocation_failure.hpp).
// Approach: the stream handle's pointer value is the engine's stream id. The per-device engine is
//   found lock-free (engine_registry::existing; slot() builds it on first use). The engines send
//   alloc and free events only while a trace or an event listener wants them (engine_observer).
//   Every function body runs in try/catch(...); phasealloc_malloc describes a failure inside the
//   try (out of line, into a per-thread record, so the hot path holds no string) and throws only
//   after leaving it.
//   Each allocation carries the calling thread's tag (allocation_tags.hpp).
//   An allocation the engine answers with out of memory asks the pressure handler once
//   (memory_pressure.hpp) and, when it gave memory back, the engine once more.
//   record_stream gets no device: the engine whose observer holds the address answers it. Once the
//   job set PyTorch's roundup_power2_divisions at run time, a request asks its engine for a block of
//   at least PyTorch's rounded size (request_rounding.hpp).
// Limitations: phasealloc_free trusts PyTorch's device argument (it is the one recorded at malloc).
#include <cinttypes>
#include <string>

#include <fmt/format.h>

#include "allocation_failure.hpp"
#include "allocation_tags.hpp"
#include "c_api_support.hpp"
#include "engine_registry.hpp"
#include "fork_guard.hpp"
#include "interpose_config.hpp"
#include "last_error.hpp"
#include "memory_pressure.hpp"
#include "phasealloc_c_api.h"
#include "request_rounding.hpp"

namespace phasealloc::interpose {
namespace {

/// Why this thread's last allocation failed (set only on the failure path, read right after).
struct allocation_failure {
  bool out_of_memory = false;
  std::string text;
};

allocation_failure& last_failure() {
  thread_local allocation_failure failure;
  return failure;
}

[[gnu::cold, gnu::noinline]] void note_failure(bool out_of_memory, std::string text) noexcept {
  try {
    allocation_failure& f = last_failure();
    f.out_of_memory = out_of_memory;
    f.text = std::move(text);
  } catch (...) {
    // Out of host memory: the failure keeps its previous text.
  }
}

/// PyTorch's out-of-memory message, word for word where it has a counterpart (tools and frameworks
/// match on "Tried to allocate X. GPU N has a total capacity of"), then phasealloc's report.
std::string torch_oom_message(const oom_report& r, ssize_t size, int device) {
  constexpr std::size_t one_exa_bytes = std::size_t{1} << 60;
  if (static_cast<std::size_t>(size) >= one_exa_bytes) {
    return fmt::format("CUDA out of memory. Tried to allocate more than 1EB memory. GPU {}: {}", device,
                       format_oom_report(r));
  }
  std::string out = fmt::format("CUDA out of memory. Tried to allocate {}. GPU {} has a total capacity of {} of which "
                                "{} is free. ",
                                format_bytes(r.requested_bytes), device, format_bytes(r.capacity_bytes),
                                format_bytes(r.device_free_bytes));
  if (r.limit_bytes != 0) out += fmt::format("{} allowed; ", format_bytes(r.limit_bytes));
  out += fmt::format("Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch but "
                     "unallocated. {}",
                     format_bytes(r.allocated_bytes), format_bytes(r.reserved_unallocated_bytes()),
                     format_oom_report(r));
  return out;
}

[[gnu::cold, gnu::noinline]] void note_engine_failure(const alloc_error& error, ssize_t size, int device) noexcept {
  try {
    const bool out_of_memory = error.code == errc::out_of_memory;
    note_failure(out_of_memory, out_of_memory ? torch_oom_message(error.report, size, device)
                                              : fmt::format("phasealloc_malloc({}) on device {} failed: {}", size,
                                                            device, to_string(error.code)));
  } catch (...) {
    note_failure(false, "phasealloc_malloc failed (out of host memory while describing why)");
  }
}

[[gnu::cold, gnu::noinline]] void note_exception(ssize_t size, int device, const char* what) noexcept {
  try {
    note_failure(false, fmt::format("phasealloc_malloc({}) on device {} failed: {}", size, device, what));
  } catch (...) {
    note_failure(false, "phasealloc_malloc failed (out of host memory)");
  }
}

/// allocate()'s engine when the device has none yet (or the size is negative): builds it first;
/// nullptr with last_failure() saying why.
[[gnu::cold, gnu::noinline]] device_slot* first_slot(ssize_t size, int device) noexcept {
  try {
    if (size < 0) {
      note_failure(false, fmt::format("phasealloc_malloc: negative size {} on device {}", size, device));
      return nullptr;
    }
    auto slot = engine_registry::instance().slot(device);
    if (slot) return slot.value();
    note_failure(false, fmt::format("phasealloc_malloc: no engine for device {}: {}", device, slot.error()));
  } catch (const std::exception& e) {
    note_exception(size, device, e.what());
  } catch (...) {
    note_exception(size, device, "unknown exception");
  }
  return nullptr;
}

/// The block, or nullptr with last_failure() saying why. The hot path keeps no string and a small
/// frame: every failure is described out of line.
void* allocate(ssize_t size, int device, void* stream) noexcept {
  if (in_forked_child()) [[unlikely]] {
    note_failure(false, forked_child_message);
    return nullptr;
  }
  try {
    device_slot* s = size >= 0 ? engine_registry::instance().existing(device) : nullptr;  // lock-free
    if (s == nullptr) [[unlikely]] {
      s = first_slot(size, device);
      if (s == nullptr) return nullptr;
    }
    const auto stream_id_value = static_cast<stream_id>(reinterpret_cast<std::uintptr_t>(stream));
    const auto bytes = static_cast<std::size_t>(size);
    const std::uint32_t tag = current_tag();
    auto addr = s->eng->allocate(bytes, stream_id_value, tag, min_block_bytes(bytes));
    if (addr) [[likely]] return reinterpret_cast<void*>(addr.value());
    if (addr.error().code == errc::out_of_memory && relieve_pressure(device, bytes)) {
      addr = s->eng->allocate(bytes, stream_id_value, tag, min_block_bytes(bytes));
      if (addr) return reinterpret_cast<void*>(addr.value());
    }
    note_engine_failure(addr.error(), size, device);
  } catch (const std::exception& e) {
    note_exception(size, device, e.what());
  } catch (...) {
    note_exception(size, device, "unknown exception");
  }
  return nullptr;
}

/// phasealloc_malloc's failure: kept as the last error, then thrown as PyTorch expects.
[[noreturn, gnu::cold, gnu::noinline]] void raise_failure() {
  const allocation_failure& f = last_failure();
  set_last_error(f.text);
  if (f.out_of_memory) throw_out_of_memory(f.text);
  throw_allocation_failure(f.text);
}

/// What phasealloc_free does when its hot path did not apply: no engine for the device, a misuse
/// the engine reported, or an exception. Out of line, so that the hot path keeps a small frame.
[[gnu::cold, gnu::noinline]] void free_slow(void* ptr, ssize_t size, int device, device_slot* slot, errc code) noexcept {
  try {
    if (slot == nullptr) {
      report_interpose_misuse(fmt::format("phasealloc_free({}, {}): device {} never allocated anything", ptr, size,
                                          device));
      return;
    }
    // The engine printed and counted it; keep it as the last error too.
    set_last_error(fmt::format("phasealloc_free({}, {}) on device {}: {}: {}", ptr, size, device, to_string(code),
                               slot->eng->last_misuse().message));
  } catch (const std::exception& e) {
    report_error(fmt::format("phasealloc_free({}, {}) on device {} failed: {}", ptr, size, device, e.what()));
  } catch (...) {
    report_error(fmt::format("phasealloc_free({}, {}) on device {} failed: unknown exception", ptr, size, device));
  }
}

[[gnu::cold, gnu::noinline]] void free_failed(void* ptr, ssize_t size, int device, const char* what) noexcept {
  try {
    report_error(fmt::format("phasealloc_free({}, {}) on device {} failed: {}", ptr, size, device, what));
  } catch (...) {
    // Out of host memory while reporting: nothing more to do.
  }
}

}  // namespace
}  // namespace phasealloc::interpose

using namespace phasealloc;
using namespace phasealloc::interpose;

extern "C" {

PHASEALLOC_API void* phasealloc_malloc(ssize_t size, int device, void* stream) {
  if (void* p = allocate(size, device, stream)) [[likely]] return p;
  raise_failure();
}

PHASEALLOC_API void* phasealloc_try_malloc(ssize_t size, int device, void* stream) {
  if (void* p = allocate(size, device, stream)) [[likely]] return p;
  set_last_error(last_failure().text);
  return nullptr;
}

PHASEALLOC_API void phasealloc_set_pressure_handler(phasealloc_pressure_fn handler) { set_pressure_handler(handler); }

PHASEALLOC_API const char* phasealloc_last_malloc_failure(int* out_of_memory) {
  const allocation_failure& f = last_failure();
  if (out_of_memory != nullptr) *out_of_memory = f.out_of_memory ? 1 : 0;
  return f.text.c_str();
}

PHASEALLOC_API void phasealloc_free(void* ptr, ssize_t size, int device, void* /*stream*/) {
  if (ptr == nullptr || in_forked_child()) return;  // a forked child's inherited memory is the parent's
  try {
    device_slot* slot = engine_registry::instance().existing(device);
    if (slot == nullptr) [[unlikely]] return free_slow(ptr, size, device, nullptr, errc::ok);
    const errc code = slot->eng->deallocate(reinterpret_cast<device_address>(ptr),
                                            size < 0 ? 0 : static_cast<std::size_t>(size));
    if (code != errc::ok) [[unlikely]] free_slow(ptr, size, device, slot, code);
  } catch (const std::exception& e) {
    free_failed(ptr, size, device, e.what());
  } catch (...) {
    free_failed(ptr, size, device, "unknown exception");
  }
}

PHASEALLOC_API void phasealloc_init(int device_count) {
  try {
    engine_registry::instance().note_device_count(device_count);
    const auto& config = process_config();
    if (!config) report_error(config.error());
  } catch (...) {
    report_error("phasealloc_init failed: unknown exception");
  }
}

PHASEALLOC_API void phasealloc_reset(void) {
  if (in_forked_child()) return;
  try {
    for (device_slot* s : engine_registry::instance().created()) s->eng->empty_cache();
    engine_registry::instance().checkpoint_traces();  // the end of an operation, for many frameworks
  } catch (const std::exception& e) {
    report_error(fmt::format("phasealloc_reset (empty_cache) failed: {}", e.what()));
  } catch (...) {
    report_error("phasealloc_reset (empty_cache) failed: unknown exception");
  }
}

PHASEALLOC_API void phasealloc_memory_fraction(double fraction, int device) {
  if (in_forked_child()) return;
  try {
    // PyTorch's range: [0, 1]. 0 leaves nothing to allocate, as in PyTorch's allocator.
    if (!(fraction >= 0.0 && fraction <= 1.0)) {
      report_error(fmt::format("set_per_process_memory_fraction({}, device {}): the fraction must be in [0, 1]",
                               fraction, device));
      return;
    }
    auto slot = engine_registry::instance().slot(device);
    if (!slot) {
      report_error(fmt::format("set_per_process_memory_fraction on device {}: {}", device, slot.error()));
      return;
    }
    engine& eng = *slot.value()->eng;
    const std::size_t capacity = slot.value()->dev->caps().capacity_bytes;
    // A limit of one byte is the engine's "nothing fits" (0 is "no limit"): fraction 0, and a
    // fraction too small for one byte of this device, which must not read as "no limit".
    auto limit = memory_limit_bytes(fraction, capacity);
    eng.set_limit_bytes(limit ? limit.value() : 1);
  } catch (const std::exception& e) {
    report_error(fmt::format("set_per_process_memory_fraction failed: {}", e.what()));
  } catch (...) {
    report_error("set_per_process_memory_fraction failed: unknown exception");
  }
}

PHASEALLOC_API int phasealloc_hold_device_calls(int device, int held) {
  if (in_forked_child()) return 0;
  return as_status("phasealloc_hold_device_calls",
                   [&] { return engine_registry::instance().hold_device_calls(device, held != 0); });
}

PHASEALLOC_API int phasealloc_enable_peer_access(int device, int peer) {
  if (in_forked_child()) return 0;
  return as_status("phasealloc_enable_peer_access",
                   [&] { return engine_registry::instance().grant_peer_access(device, peer); });
}

PHASEALLOC_API int phasealloc_set_request_divisions(const size_t* divisions, size_t count) {
  return as_status("phasealloc_set_request_divisions", [&] { return set_request_divisions(divisions, count); });
}

PHASEALLOC_API int phasealloc_set_limit_bytes(int device, size_t limit_bytes) {
  if (in_forked_child()) return 0;
  return as_status("phasealloc_set_limit_bytes", [&] {
    auto slot = engine_registry::instance().slot(device);
    if (!slot) return fmt::format("device {}: {}", device, slot.error());
    slot.value()->eng->set_limit_bytes(limit_bytes);
    return std::string();
  });
}

PHASEALLOC_API void phasealloc_record_stream(void* ptr, void* stream) {
  if (in_forked_child()) return;
  try {
    const auto addr = reinterpret_cast<device_address>(ptr);
    const auto sid = static_cast<stream_id>(reinterpret_cast<std::uintptr_t>(stream));
    const std::vector<device_slot*> slots = engine_registry::instance().created();
    device_slot* owner = nullptr;
    for (device_slot* s : slots) {
      if (s->observer.holds(addr)) {
        owner = s;
        break;
      }
    }
    if (owner == nullptr && slots.size() == 1) owner = slots.front();  // its engine reports precisely
    if (owner == nullptr) {
      report_interpose_misuse(fmt::format("record_stream({}, stream {:#x}): no device's engine holds that address",
                                          ptr, sid));
      return;
    }
    const errc code = owner->eng->record_stream(addr, sid);
    if (code != errc::ok) {
      set_last_error(fmt::format("record_stream({}) on device {}: {}: {}", ptr, owner->ordinal, to_string(code),
                                 owner->eng->last_misuse().message));
    }
  } catch (const std::exception& e) {
    report_error(fmt::format("record_stream({}) failed: {}", ptr, e.what()));
  } catch (...) {
    report_error("record_stream failed: unknown exception");
  }
}

}  // extern "C"
