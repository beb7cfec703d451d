// Allocation tags: a name the job gives to what it allocates (`with phasealloc.tag("adam"):`),
// carried by each block to the engine's policy and to same-address offload.
//
// Design note
// Rationale: offloading "the optimizer's state" by pointers needs the job to list its tensors;
//   offloading a tag needs nothing but the tag, and a policy that gives each tag pages of its own
//   (the phasealloc policy's tag pools) lets an offload move whole pages and keep nothing behind.
// Approach: names are numbered from named_tag_base (phasealloc/types.hpp) in the order they are
//   first asked for, process-wide (0 is "untagged"); the tag in force is per thread, and the
//   allocating thread's tag goes with each allocation. The hot path reads one relaxed flag, and the
//   thread-local word only once some thread set a tag. The word is in the default TLS model: the
//   library is dlopen'ed (ctypes), where initial-exec TLS would take glibc's small static-TLS
//   surplus and can make the load fail ("cannot allocate memory in static TLS block") when other
//   libraries used it up.
// Limitations: allocations made on another thread (autograd's backward threads, a data loader's)
//   carry that thread's tag, not the one set around the call that caused them; the phasealloc
//   policy gives pools of their own to the first 15 names only (phasealloc_policy.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc::interpose {

namespace detail {
/// Whether any thread ever set a tag: until then the allocation path reads no thread-local.
/// Relaxed is enough: a thread whose tag is not 0 set it itself, after its own store here.
inline std::atomic<bool> tags_set{false};
inline thread_local std::uint32_t thread_tag = 0;
}  // namespace detail

/// The tag the calling thread's allocations carry now (0: none).
inline std::uint32_t current_tag() noexcept {
  return detail::tags_set.load(std::memory_order_relaxed) ? detail::thread_tag : 0;
}

/// Makes `tag` the calling thread's tag; returns the one it replaces.
inline std::uint32_t swap_tag(std::uint32_t tag) noexcept {
  if (tag != 0) detail::tags_set.store(true, std::memory_order_relaxed);
  const std::uint32_t previous = detail::thread_tag;
  detail::thread_tag = tag;
  return previous;
}

/// The number of `name` (numbered from named_tag_base on first use), or why it cannot be a tag name
/// (empty, over 200 bytes, or a control character in it).
result<std::uint32_t, std::string> tag_of(std::string_view name);

/// The number of `name` when a name was numbered so (0 when not: nothing is numbered here).
std::uint32_t find_tag(std::string_view name);

/// The name of tag `tag`, or an empty string when no name has that number.
std::string tag_name(std::uint32_t tag);

}  // namespace phasealloc::interpose
