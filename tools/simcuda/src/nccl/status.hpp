// Errors of the NCCL stand-in: NCCL's status codes, the one line that says what was wrong, and the
// text ncclGetLastError hands back.
#pragma once

#include "nccl_types.hpp"

namespace simcuda::nccl {

inline constexpr const char* library = "libnccl.so.2";

/// Reports a failure of `function`: prints "simcuda: libnccl.so.2: <function>: <what>" on stderr,
/// keeps the text for ncclGetLastError and returns `code`. printf-style.
ncclResult_t fail(ncclResult_t code, const char* function, const char* format, ...) noexcept
    __attribute__((format(printf, 3, 4)));

/// The text of the last failure (empty when none), as ncclGetLastError returns it.
const char* last_error() noexcept;

}  // namespace simcuda::nccl
