// How phasealloc_malloc fails: by throwing, because PyTorch does not check for NULL.
//
// Design note
// Rationale: CUDAPluggableAllocator stores whatever the malloc function returns (it never checks
//   for NULL): a NULL becomes a tensor with a null data pointer and a crash far away. PyTorch calls
//   our function through std::function from C++, so a C++ exception thrown here unwinds into
//   PyTorch and its Python binding turns it into a Python exception, as real pluggable allocators
//   do. Users and libraries (accelerate's batch-size finder, OOM handlers) look for
//   torch.cuda.OutOfMemoryError, i.e. c10::OutOfMemoryError, which only code compiled against c10
//   can throw; linking c10 into this library would stop it from loading without torch (tools,
//   ctypes tests).
// Approach: a companion library, libphasealloc_torch_oom.so (src/torch_oom.cpp, built only when
//   c10 headers and libc10 are found), exports phasealloc_throw_torch_oom(message), which throws
//   c10::OutOfMemoryError. At the first out-of-memory the companion is dlopen'ed from the folder
//   this library was loaded from; in a torch process its libc10.so dependency resolves to the
//   already loaded one. When it is absent or does not load (no torch in the process, another
//   c10 ABI), a std::runtime_error is thrown instead (RuntimeError in Python). Both messages start
//   with "CUDA out of memory." (what OOM handlers match on) followed by the per-phase report.
//   Other failures (bad configuration, no usable device) throw std::runtime_error.
// Limitations: a caller that is not C++ (ctypes, C) must not call phasealloc_malloc when it can
//   fail: it has phasealloc_try_malloc.
#pragma once

#include <string>

namespace phasealloc::interpose {

/// Throws the out-of-memory exception described above. `message` is the full text.
[[noreturn]] void throw_out_of_memory(const std::string& message);

/// Throws std::runtime_error(message).
[[noreturn]] void throw_allocation_failure(const std::string& message);

}  // namespace phasealloc::interpose
