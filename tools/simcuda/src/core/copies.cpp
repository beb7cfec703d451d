// The two questions every copy asks, the runtime's and the driver's alike: whether a side of it is
// valid, and whether it moves its bytes, by value level (core.hpp says why): every copy does but one
// between two device ranges at values:off. A graph's memcpy nodes ask here too.
#include "simcuda/core.hpp"

namespace simcuda {

namespace {

bool on_device(const void* pointer) noexcept {
  pointer_info info = find_pointer(pointer);
  return info.kind == pointer_kind::device || info.device >= 0;
}

}  // namespace

bool copy_side_ok(const void* pointer, std::size_t bytes, bool must_be_device, bool must_be_host) noexcept {
  const bool in_arena = on_device(pointer);
  if (must_be_device && !in_arena) return false;
  if (must_be_host && in_arena) return false;
  if (in_arena) return device_range_accessible(pointer, bytes);
  return pointer != nullptr;
}

bool copy_moves_bytes(void* dst, const void* src) noexcept {
  if (current_config().values != value_level::off) return true;
  return !(on_device(dst) && on_device(src));
}

}  // namespace simcuda
