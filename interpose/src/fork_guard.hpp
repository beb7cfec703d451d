// A process forked from one that uses phasealloc: the child makes no CUDA call and takes no lock.
//
// Design note
// Rationale: CUDA does not survive fork(), and PyTorch refuses CUDA in a forked child ("Cannot
//   re-initialize CUDA in forked subprocess"). A child still reaches the allocator: it frees the
//   tensors it inherited (garbage collection in a DataLoader worker), its phase hooks fire when it
//   runs a module, it may call empty_cache. The engines would then record events, unmap pages or wait
//   on an engine mutex that another thread of the parent held at the fork, forever.
// Approach: a pthread_atfork child handler sets one flag, when the parent had made an engine (used
//   a GPU through phasealloc), and does nothing else. The C entry points read it: in a forked child,
//   an allocation fails and says why, a free forgets the pointer (the memory is the parent's), and
//   phase changes, empty_cache, record_stream and memory fractions do nothing. The parent is
//   untouched. A fork before any engine exists is free to use CUDA, as PyTorch allows a fork before
//   CUDA is initialised (a DataLoader created before the model moves to the GPU).
// Limitations: the child's books still show what the parent held at the fork.
#pragma once

#include <atomic>

namespace phasealloc::interpose {

namespace detail {
inline std::atomic<bool> forked_child{false};
inline std::atomic<bool> engine_made{false};  ///< an engine exists: the process uses a GPU through phasealloc
}

/// Whether this process is a fork of one that used a GPU through phasealloc.
inline bool in_forked_child() noexcept { return detail::forked_child.load(std::memory_order_relaxed); }

/// Registers the child handler (once per process; later calls do nothing).
void install_fork_guard() noexcept;

/// Called when the first engine is made: from then on a forked child is refused CUDA.
inline void note_engine_made() noexcept { detail::engine_made.store(true, std::memory_order_relaxed); }

/// What an allocation in a forked child says.
inline constexpr const char* forked_child_message =
    "phasealloc: CUDA memory cannot be allocated in a process forked from one that uses CUDA (CUDA does not "
    "survive fork); start workers with the 'spawn' start method";

}  // namespace phasealloc::interpose
