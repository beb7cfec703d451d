// Maps in a range of a large buffer that is about to be written, in one system call (private
// header).
//
// Design note
// Rationale: a 17 M-event trace decodes into 680 MB of events. Touching them page by page took
//   166 k page faults, each an exception entry and exit around the kernel's page allocation: about
//   0.1 s of a 2.1 s replay on top of zeroing the pages, which is unavoidable.
// Approach: madvise(MADV_POPULATE_WRITE) (Linux 5.14) on the whole pages inside a range of the
//   buffer just before it is written; the caller goes a chunk (about a megabyte) at a time, so the
//   zeroed pages are still in cache when written, and only for large buffers.
// Limitations: Linux only, a no-op elsewhere or where the kernel refuses (older kernels): nothing
//   changes then but speed. The pages count as resident at once, so call it only on memory that
//   will be written (a reservation sized from what the input says it holds).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace phasealloc::detail {

inline void prefault_for_write(const void* data, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  constexpr std::uintptr_t page = 4096;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + page - 1) & ~(page - 1);
  const std::uintptr_t last = (begin + bytes) & ~(page - 1);
  if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace phasealloc::detail
