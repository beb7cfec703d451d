// Whether a copy moves its bytes, by value level (core.hpp says why): every copy does but one
// between two device ranges at values:off. The runtime's copies and a graph's memcpy nodes ask here.
#include "simcuda/core.hpp"

namespace simcuda {

namespace {

bool on_device(const void* pointer) noexcept {
  pointer_info info = find_pointer(pointer);
  return info.kind == pointer_kind::device || info.device >= 0;
}

}  // namespace

bool copy_moves_bytes(void* dst, const void* src) noexcept {
  if (current_config().values != value_level::off) return true;
  return !(on_device(dst) && on_device(src));
}

}  // namespace simcuda
