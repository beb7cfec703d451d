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

/// How a move call was made and where its results go.
struct move_call {
  bool restore = false;
  bool non_blocking = false;
  phasealloc_offload_result* out = nullptr;
  std::uint64_t* ticket = nullptr;  ///< non_blocking: the ticket of the moves in flight (0: none)
  errc code = errc::ok;             ///< the engine's errc of a failure
  bool copies_named = false;         ///< copy only `copy_only` (move_options::copy_only)
  std::vector<byte_range> copy_only = {};

  move_options options() const {
    move_options o{.non_blocking = non_blocking};
    if (copies_named) o.copy_only = std::span<const byte_range>(copy_only);
    return o;
  }
};

/// The outcome of an offload or a restore: into `out` (and the ticket), its error's text (empty when
/// none) returned and its errc into `code`.
std::string report(int device, const result<offload_outcome, offload_error>& r, phasealloc_offload_result* out,
                   errc& code, std::uint64_t* ticket = nullptr) {
  if (r) {
    put(r.value(), out);
    if (ticket != nullptr) *ticket = r.value().ticket;
    return {};
  }
  put(r.error().done, out);
  code = r.error().code;
  return fmt::format("device {}: {}", device, r.error().message);
}

/// Runs the offload or restore of `call` over the blocks at ptrs[0..count) on `device`'s engine.
std::string move_blocks(move_call& call, int device, void* const* ptrs, std::size_t count) {
  put(offload_outcome{}, call.out);
  if (call.ticket != nullptr) *call.ticket = 0;
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
  return report(device,
                call.restore ? slot->eng->restore(addrs, call.options()) : slot->eng->offload(addrs, call.options()),
                call.out, call.code, call.ticket);
}

/// Runs the offload or restore of `call` over the blocks carrying `tag` on `device`'s engine.
std::string move_tag(move_call& call, int device, std::uint32_t tag) {
  put(offload_outcome{}, call.out);
  if (call.ticket != nullptr) *call.ticket = 0;
  if (std::string bad = check_device(device, false); !bad.empty()) return bad;
  if (tag == 0) return "tag 0 means untagged: name a tag (phasealloc_tag_id)";
  if (tag_name(tag).empty()) return fmt::format("no tag has the number {} (phasealloc_tag_id numbers them)", tag);
  device_slot* slot = engine_registry::instance().existing(device);
  if (slot == nullptr) return {};  // nothing allocated on the device: nothing carries the tag
  return report(device,
                call.restore ? slot->eng->restore_tagged(tag, call.options()) : slot->eng->offload_tagged(tag, call.options()),
                call.out, call.code, call.ticket);
}

/// A move call through as_status: -2 for a restore out of device memory, else as_status's answer.
template <typename Body>
int run_move(const char* name, move_call& call, Body&& body) {
  const int status = as_status(name, [&] {
    if (in_forked_child()) return std::string(forked_child_refusal);
    return body();
  });
  return status != 0 && call.restore && call.code == errc::out_of_memory ? restore_out_of_memory : status;
}

/// A started move's call: by tag when `tag` is not 0 (then no pointers), else over the pointers.
int start_move(const char* name, bool restore, int device, void* const* ptrs, std::size_t count, std::uint32_t tag,
               phasealloc_offload_result* out, std::uint64_t* ticket) {
  move_call call{.restore = restore, .non_blocking = true, .out = out, .ticket = ticket};
  return run_move(name, call, [&] {
    if (tag != 0 && count != 0) {
      put(offload_outcome{}, out);
      return fmt::format("both a tag ({}) and {} pointers: name one", tag, count);
    }
    return tag != 0 ? move_tag(call, device, tag) : move_blocks(call, device, ptrs, count);
  });
}

}  // namespace

PHASEALLOC_API int phasealloc_offload(int device, void* const* ptrs, size_t count, phasealloc_offload_result* out) {
  move_call call{.restore = false, .out = out};
  return run_move("phasealloc_offload", call, [&] { return move_blocks(call, device, ptrs, count); });
}

PHASEALLOC_API int phasealloc_restore(int device, void* const* ptrs, size_t count, phasealloc_offload_result* out) {
  move_call call{.restore = true, .out = out};
  return run_move("phasealloc_restore", call, [&] { return move_blocks(call, device, ptrs, count); });
}

PHASEALLOC_API int phasealloc_offload_tag(int device, uint32_t tag, phasealloc_offload_result* out) {
  move_call call{.restore = false, .out = out};
  return run_move("phasealloc_offload_tag", call, [&] { return move_tag(call, device, tag); });
}

PHASEALLOC_API int phasealloc_restore_tag(int device, uint32_t tag, phasealloc_offload_result* out) {
  move_call call{.restore = true, .out = out};
  return run_move("phasealloc_restore_tag", call, [&] { return move_tag(call, device, tag); });
}

PHASEALLOC_API int phasealloc_offload_start(int device, void* const* ptrs, size_t count, uint32_t tag,
                                            phasealloc_offload_result* out, uint64_t* ticket) {
  return start_move("phasealloc_offload_start", false, device, ptrs, count, tag, out, ticket);
}

PHASEALLOC_API int phasealloc_restore_start(int device, void* const* ptrs, size_t count, uint32_t tag,
                                            phasealloc_offload_result* out, uint64_t* ticket) {
  return start_move("phasealloc_restore_start", true, device, ptrs, count, tag, out, ticket);
}

PHASEALLOC_API int phasealloc_move_lent(int device, int restore, int non_blocking, void* const* ptrs, size_t count,
                                        void* const* span_addrs, const size_t* span_bytes, size_t span_count,
                                        phasealloc_offload_result* out, uint64_t* ticket) {
  move_call call{.restore = restore != 0, .non_blocking = non_blocking != 0, .out = out, .ticket = ticket};
  return run_move("phasealloc_move_lent", call, [&]() -> std::string {
    put(offload_outcome{}, out);
    if (ticket != nullptr) *ticket = 0;
    if (count == 0) return "no segment named (a restore of every range would copy only the spans)";
    if (span_count > 0 && (span_addrs == nullptr || span_bytes == nullptr)) {
      return fmt::format("{} spans at NULL", span_count);
    }
    call.copies_named = true;
    std::vector<byte_range>& spans = call.copy_only;
    spans.reserve(span_count);
    for (std::size_t i = 0; i < span_count; ++i) {
      const byte_range r{reinterpret_cast<device_address>(span_addrs[i]), span_bytes[i]};
      if (r.bytes == 0 || r.addr + r.bytes < r.addr) return fmt::format("span {} ([{:#x}, +{})) is empty or wraps", i, r.addr, r.bytes);
      if (!spans.empty() && spans.back().addr + spans.back().bytes > r.addr) {
        return fmt::format("span {} ([{:#x}, +{})) overlaps or precedes the one before: spans go in address order", i,
                           r.addr, r.bytes);
      }
      spans.push_back(r);
    }
    return move_blocks(call, device, ptrs, count);
  });
}

PHASEALLOC_API int phasealloc_finish_moves(int device, uint64_t ticket, int wait) {
  int answer = -1;
  const int status = as_status("phasealloc_finish_moves", [&] {
    if (in_forked_child()) return std::string(forked_child_refusal);
    if (std::string bad = check_device(device, false); !bad.empty()) return bad;
    device_slot* slot = engine_registry::instance().existing(device);
    if (slot == nullptr) {
      answer = 1;  // nothing allocated on the device: nothing in flight
      return std::string();
    }
    const result<bool, offload_error> r = slot->eng->finish_moves(ticket, wait != 0);
    if (!r) return fmt::format("device {}: {}", device, r.error().message);
    answer = r.value() ? 1 : 0;
    return std::string();
  });
  return status != 0 ? -1 : answer;
}

PHASEALLOC_API int phasealloc_order_after_moves(int device, uint64_t ticket, void* stream) {
  return as_status("phasealloc_order_after_moves", [&] {
    if (in_forked_child()) return std::string(forked_child_refusal);
    if (std::string bad = check_device(device, false); !bad.empty()) return bad;
    device_slot* slot = engine_registry::instance().existing(device);
    if (slot == nullptr) return std::string();  // nothing in flight
    const errc e = slot->eng->order_after_moves(ticket, reinterpret_cast<stream_id>(stream));
    if (e == errc::ok) return std::string();
    const std::string why = slot->dev->last_failure();
    return fmt::format("device {}: ordering stream {} after the moves of ticket {}: {}{}{}", device, stream, ticket,
                       to_string(e), why.empty() ? "" : ": ", why);
  });
}

PHASEALLOC_API int phasealloc_offload_kind(int device) {
  int kind = -1;
  const int status = as_status("phasealloc_offload_kind", [&] {
    if (in_forked_child()) return std::string(forked_child_refusal);
    if (std::string bad = check_device(device, false); !bad.empty()) return bad;
    auto slot = engine_registry::instance().slot(device);  // makes the device when nothing did yet
    if (!slot) return slot.error();
    const device_caps& caps = slot.value()->dev->caps();
    kind = caps.has_host_backing ? 1 : caps.offload_unmaps ? 2 : 0;
    return std::string();
  });
  return status != 0 ? -1 : kind;
}

PHASEALLOC_API size_t phasealloc_tag_bytes(int device, uint32_t tag) {
  std::size_t bytes = 0;
  (void)as_status("phasealloc_tag_bytes", [&] {
    if (std::string bad = check_device(device, false); !bad.empty()) return bad;
    if (device_slot* slot = engine_registry::instance().existing(device)) bytes = slot->eng->tagged_bytes(tag);
    return std::string();
  });
  return bytes;
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
