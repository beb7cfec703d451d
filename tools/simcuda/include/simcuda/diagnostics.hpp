// What the simulator reports and counts: calls it does not emulate, illegal operands, counters.
// Part of simcuda's core API (core.hpp gathers it, with the glossary).
#pragma once

#include "simcuda/config.hpp"

namespace simcuda {

// ---------------------------------------------------------------------------------------------
// Errors and counters
// ---------------------------------------------------------------------------------------------

/// Reports a call to a function the simulator does not emulate: one line on stderr
/// ("simcuda: <library>: <function> is not emulated ..."), counted; aborts when strict.
/// Returns `code` so a stub can `return simcuda::unemulated(...)`.
int unemulated(const char* library, const char* function, int code) noexcept;

/// Reports an emulated function called with arguments it cannot honour (a flag, a mode):
/// one line naming the function and the reason, counted like unemulated(); aborts when strict.
int unsupported(const char* library, const char* function, const char* why, int code) noexcept;

/// Aborts the process with "simcuda: fatal: <what>" (broken invariant inside the simulator).
[[noreturn]] void fatal(const char* what) noexcept;

struct counters {
  std::uint64_t kernel_launches = 0;   ///< every launch entry point, library GEMMs included
  std::uint64_t library_calls = 0;     ///< cuBLAS/cuBLASLt compute calls (counted in launches too)
  std::uint64_t memcpy_calls = 0;
  std::uint64_t memcpy_bytes = 0;
  std::uint64_t memset_calls = 0;
  std::uint64_t device_mallocs = 0;    ///< cudaMalloc/cudaMallocAsync successes
  std::uint64_t device_frees = 0;
  std::uint64_t vmm_creates = 0;       ///< cuMemCreate successes
  std::uint64_t vmm_maps = 0;
  std::uint64_t vmm_unmaps = 0;
  std::uint64_t unemulated_calls = 0;  ///< unemulated() + unsupported()
  std::uint64_t out_of_memory = 0;     ///< refused for capacity
  std::uint64_t fat_binaries = 0;
  std::uint64_t functions_registered = 0;
  std::uint64_t stream_waits = 0;      ///< cudaStreamWaitEvent/cuStreamWaitEvent outside a capture
};

/// A snapshot of the process-wide counters.
counters read_counters() noexcept;
void count_kernel_launch() noexcept;
void count_stream_wait() noexcept;
void count_library_call() noexcept;
void count_memcpy(std::size_t bytes) noexcept;
void count_memset() noexcept;
void count_fat_binary() noexcept;
void count_function_registered() noexcept;

/// Reports an access a kernel would make outside accessible device memory (on a GPU: an illegal
/// address). One line naming the function and the operand; counted; aborts when strict.
void illegal_operand(const char* library, const char* function, const char* operand, const void* pointer,
                     std::size_t bytes) noexcept;

}  // namespace simcuda

/// The C entry point the generated stubs call (they are compiled as C).
extern "C" int simcuda_unemulated(const char* library, const char* function, int code);
