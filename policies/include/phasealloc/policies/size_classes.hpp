// phasealloc's size-class table: which pool serves a request, and how it is rounded.
//
// Rationale: small and large blocks have different lifetimes and different costs when they share
//   pages. A 4 KiB tensor that outlives its neighbours pins a whole 2 MiB page; packed among other
//   small blocks it pins only its share. So small requests get their own pool and pages.
// Approach: two classes, and rounding to 512 B everywhere. Pages are 2 MiB (one CUDA VMM granule)
//   and blocks split at any 512 B boundary, so finer size classes would only add rounding waste.
//
//   class   requests            rounding  pool page  worst rounding waste   (waste at the top)
//   small   1 B .. 1 MiB        512 B     2 MiB      511 B (99.8% at 1 B,   0.05% at 1 MiB)
//                                                     49.9% at 513 B)
//   large   > 1 MiB             512 B     2 MiB      511 B (< 0.05%)        -
//
//   Rounding waste is counted in allocated bytes (as PyTorch counts it), not in fragmentation.
//   The 512 B minimum matches PyTorch's kMinBlockSize, so a replay compares block for block.
// Limitations: no per-class slabs; a phase that frees every small block returns their pages only
//   when whole pages are free.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "phasealloc/types.hpp"

namespace phasealloc {

struct size_class {
  std::string_view name;
  std::size_t max_bytes;       ///< Largest request of the class (inclusive).
  std::size_t round_bytes;     ///< Requests round up to a multiple of this.
  std::size_t page_bytes;      ///< Mapping unit of the class's pool.
};

inline constexpr std::array<size_class, 2> size_classes{{
    {"small", 1 * mib, 512, 2 * mib},
    {"large", SIZE_MAX, 512, 2 * mib},
}};

/// Index into size_classes of the class serving `bytes`.
constexpr std::size_t size_class_of(std::size_t bytes) noexcept {
  for (std::size_t i = 0; i + 1 < size_classes.size(); ++i) {
    if (bytes <= size_classes[i].max_bytes) return i;
  }
  return size_classes.size() - 1;
}

/// The rounded size of a request: at least 512 B, a multiple of its class's rounding.
constexpr std::size_t round_to_class(std::size_t bytes) noexcept {
  const std::size_t r = size_classes[size_class_of(bytes)].round_bytes;
  return bytes < r ? r : round_up(bytes, r);
}

}  // namespace phasealloc
