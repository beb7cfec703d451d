// The C entry points of same-address offload: pointers in, the engine's offload/restore, its
// outcome out (engine_offload.cpp has the mechanism and its note).
#include <vector>

#include "c_api_support.hpp"
#include "engine_registry.hpp"
#include "fork_guard.hpp"
#include "phasealloc_c_api.h"

using namespace phasealloc;
using namespace phasealloc::interpose;

namespace {

constexpr int restore_out_of_memory = -2;
constexpr const char* forked_child_refusal =
    "in a forked child: the parent's device memory is not this process's to move (the child has no CUDA context)";

void put(const offload_outcome& done, phasealloc_offload_result* out) {
  if (out == nullptr) return;
  *out = phasealloc_offload_result{done.blocks, done.ranges, done.page_bytes, done.copied_bytes, done.kept_bytes};
}

/// Runs offload (restore = false) or restore on `device`'s engine; `code` gets the engine's errc.
std::string move_blocks(bool restore, int device, void* const* ptrs, std::size_t count,
                        phasealloc_offload_result* out, errc& code) {
  put(offload_outcome{}, out);
  if (std::string bad = check_device(device, false); !bad.empty()) return bad;
  if (count > 0 && ptrs == nullptr) return fmt::format("{} pointers at NULL", count);
  device_slot* slot = engine_registry::instance().existing(device);
  if (slot == nullptr) {
    if (count == 0) return {};  // nothing allocated on the device: nothing to restore
    return fmt::format("device {} has allocated nothing: {:#x} is not phasealloc's", device,
                       reinterpret_cast<std::uintptr_t>(ptrs[0]));
  }
  std::vector<device_address> addrs(count);
  for (std::size_t i = 0; i < count; ++i) addrs[i] = reinterpret_cast<device_address>(ptrs[i]);
  auto r = restore ? slot->eng->restore(addrs) : slot->eng->offload(addrs);
  if (r) {
    put(r.value(), out);
    return {};
  }
  put(r.error().done, out);
  code = r.error().code;
  return fmt::format("device {}: {}", device, r.error().message);
}

}  // namespace

PHASEALLOC_API int phasealloc_offload(int device, void* const* ptrs, size_t count, phasealloc_offload_result* out) {
  errc code = errc::ok;
  return as_status("phasealloc_offload", [&] {
    if (in_forked_child()) return std::string(forked_child_refusal);
    return move_blocks(false, device, ptrs, count, out, code);
  });
}

PHASEALLOC_API int phasealloc_restore(int device, void* const* ptrs, size_t count, phasealloc_offload_result* out) {
  errc code = errc::ok;
  const int status = as_status("phasealloc_restore", [&] {
    if (in_forked_child()) return std::string(forked_child_refusal);
    return move_blocks(true, device, ptrs, count, out, code);
  });
  return status != 0 && code == errc::out_of_memory ? restore_out_of_memory : status;
}
