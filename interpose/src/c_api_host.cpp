// Page-locked host buffers for offload copies: phasealloc_host_alloc, _free and _trim.
//
// Design note
// Rationale: offloading chunks (parameters, optimizer state, activations) copies them to the host
//   and back every iteration; the copies overlap compute only through page-locked memory, which
//   is slow to lock and scarce, so the buffers are kept and reused under a byte budget
//   (host_pool.hpp). The caller that offloads (the Python package's chunk_offloader, or any
//   framework) needs them from the same library that owns the GPU's streams and events.
// Approach: each GPU ordinal's slot holds a host_pool_slot; phasealloc_host_alloc builds the slot
//   (device and engine, as a first malloc would) and the pool on first use, then acquires. Frees
//   release with an event recorded on the caller's stream, so a copy enqueued there before the
//   free finishes before the buffer is handed out again. A refused allocation (over budget, pool
//   disabled, host out of lockable memory) is an expected outcome, NULL with the last error and
//   nothing on stderr: the caller copies through pageable memory instead. A bad free is misuse,
//   reported as phasealloc_free's are (stderr, counted in interpose_misuse, fatal under strict).
// Limitations: a buffer must be freed with the ordinal that allocated it. Trim frees idle buffers
//   only: buffers whose copies are still in flight stay until the next trim.
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "c_api_support.hpp"
#include "engine_registry.hpp"
#include "last_error.hpp"
#include "phasealloc_c_api.h"

namespace phasealloc::interpose {
namespace {

/// Acquires from `device`'s pool; nullptr with the failure in `failure`.
void* host_alloc(std::size_t size, int device, std::string& failure) {
  if (size == 0) {
    failure = "size 0: a host buffer needs at least one byte";
    return nullptr;
  }
  auto slot = engine_registry::instance().slot(device);
  if (!slot) {
    failure = fmt::format("no engine for device {}: {}", device, slot.error());
    return nullptr;
  }
  auto pool = slot.value()->host.pool();
  if (!pool) {
    failure = pool.error();
    return nullptr;
  }
  auto buffer = pool.value()->acquire(size);
  if (!buffer) {
    failure = buffer.error().message;
    return nullptr;
  }
  return buffer.value().ptr;
}

/// Releases to `device`'s pool: "" or the misuse to report.
std::string host_free(void* ptr, int device, void* stream) {
  device_slot* slot = engine_registry::instance().existing(device);
  host_pool* pool = slot != nullptr ? slot->host.existing() : nullptr;
  if (pool == nullptr) {
    return fmt::format("{}: device {} has no host buffer pool (phasealloc_host_alloc never succeeded there)",
                       to_string(errc::unknown_pointer), device);
  }
  const auto sid = static_cast<stream_id>(reinterpret_cast<std::uintptr_t>(stream));
  const errc code = pool->release(ptr, sid, /*record=*/true);
  switch (code) {
    case errc::ok: return {};
    case errc::double_free: return fmt::format("{}: the host buffer was already freed", to_string(code));
    case errc::unknown_pointer:
      return fmt::format("{}: not a buffer of device {}'s host pool", to_string(code), device);
    default: return std::string(to_string(code));
  }
}

}  // namespace
}  // namespace phasealloc::interpose

using namespace phasealloc;
using namespace phasealloc::interpose;

extern "C" {

PHASEALLOC_API void* phasealloc_host_alloc(size_t size, int device) {
  try {
    std::string failure;
    if (void* ptr = host_alloc(size, device, failure)) return ptr;
    set_last_error(fmt::format("phasealloc_host_alloc({}) on device {}: {}", size, device, failure));
  } catch (const std::exception& e) {
    set_last_error(fmt::format("phasealloc_host_alloc({}) on device {} failed: {}", size, device, e.what()));
  } catch (...) {
    set_last_error(fmt::format("phasealloc_host_alloc({}) on device {} failed: unknown exception", size, device));
  }
  return nullptr;
}

PHASEALLOC_API int phasealloc_host_free(void* ptr, int device, void* stream) {
  if (ptr == nullptr) return 0;
  try {
    const std::string misuse = host_free(ptr, device, stream);
    if (misuse.empty()) return 0;
    report_interpose_misuse(fmt::format("phasealloc_host_free({}) on device {}: {}", ptr, device, misuse));
  } catch (const std::exception& e) {
    report_error(fmt::format("phasealloc_host_free({}) on device {} failed: {}", ptr, device, e.what()));
  } catch (...) {
    report_error(fmt::format("phasealloc_host_free({}) on device {} failed: unknown exception", ptr, device));
  }
  return -1;
}

PHASEALLOC_API int phasealloc_host_trim(int device) {
  return as_status("phasealloc_host_trim", [&] {
    std::string bad = check_device(device, true);
    if (bad.empty()) {
      for (device_slot* s : slots_for(device)) {
        if (host_pool* pool = s->host.existing()) pool->trim(0);
      }
    }
    return bad;
  });
}

}  // extern "C"
