// The C entry points of same-address offload: pointers in, the engine's offload/restore, its
// outcome out (engine_offload.cpp has the mechanism and its note).
#include <vector>

#include "allocation_tags.hpp"
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

/// The outcome of an offload or a restore: into `out`, its error's text (empty when none) returned
/// and its errc into `code`.
std::string report(int device, const result<offload_outcome, offload_error>& r, phasealloc_offload_result* out,
                   errc& code) {
  if (r) {
    put(r.value(), out);
    return {};
  }
  put(r.error().done, out);
  code = r.error().code;
  return fmt::format("device {}: {}", device, r.error().message);
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
  return report(device, restore ? slot->eng->restore(addrs) : slot->eng->offload(addrs), out, code);
}

/// Runs offload (restore = false) or restore of the blocks carrying `tag` on `device`'s engine.
std::string move_tag(bool restore, int device, std::uint32_t tag, phasealloc_offload_result* out, errc& code) {
  put(offload_outcome{}, out);
  if (std::string bad = check_device(device, false); !bad.empty()) return bad;
  if (tag == 0) return "tag 0 means untagged: name a tag (phasealloc_tag_id)";
  if (tag_name(tag).empty()) return fmt::format("no tag has the number {} (phasealloc_tag_id numbers them)", tag);
  device_slot* slot = engine_registry::instance().existing(device);
  if (slot == nullptr) return {};  // nothing allocated on the device: nothing carries the tag
  return report(device, restore ? slot->eng->restore_tagged(tag) : slot->eng->offload_tagged(tag), out, code);
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

PHASEALLOC_API int phasealloc_offload_tag(int device, uint32_t tag, phasealloc_offload_result* out) {
  errc code = errc::ok;
  return as_status("phasealloc_offload_tag", [&] {
    if (in_forked_child()) return std::string(forked_child_refusal);
    return move_tag(false, device, tag, out, code);
  });
}

PHASEALLOC_API int phasealloc_restore_tag(int device, uint32_t tag, phasealloc_offload_result* out) {
  errc code = errc::ok;
  const int status = as_status("phasealloc_restore_tag", [&] {
    if (in_forked_child()) return std::string(forked_child_refusal);
    return move_tag(true, device, tag, out, code);
  });
  return status != 0 && code == errc::out_of_memory ? restore_out_of_memory : status;
}

PHASEALLOC_API uint32_t phasealloc_tag_id(const char* name) {
  std::uint32_t tag = 0;
  (void)as_status("phasealloc_tag_id", [&] {
    if (name == nullptr) return std::string("a NULL tag name");
    auto r = tag_of(name);
    if (!r) return r.error();
    tag = r.value();
    return std::string();
  });
  return tag;
}

PHASEALLOC_API uint32_t phasealloc_find_tag(const char* name) {
  try {
    return name == nullptr ? 0 : find_tag(name);
  } catch (...) {
    return 0;  // out of host memory while comparing: no such tag
  }
}

PHASEALLOC_API uint32_t phasealloc_set_thread_tag(uint32_t tag) { return swap_tag(tag); }
