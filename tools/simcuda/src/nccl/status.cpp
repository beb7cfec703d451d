// ncclGetErrorString and ncclGetLastError, and the one function every failure goes through.
#include "status.hpp"

#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace simcuda::nccl {

namespace {

std::mutex last_error_mutex;
// NCCL keeps one process-wide buffer for the last warning; so does the stand-in.
char last_error_text[1024] = "";

}  // namespace

ncclResult_t fail(ncclResult_t code, const char* function, const char* format, ...) noexcept {
  char what[768];
  va_list args;
  va_start(args, format);
  std::vsnprintf(what, sizeof what, format, args);
  va_end(args);
  {
    std::lock_guard<std::mutex> lock(last_error_mutex);
    std::snprintf(last_error_text, sizeof last_error_text, "%s: %s", function, what);
  }
  std::fprintf(stderr, "simcuda: %s: %s: %s\n", library, function, what);
  return code;
}

const char* last_error() noexcept {
  std::lock_guard<std::mutex> lock(last_error_mutex);
  return last_error_text;
}

}  // namespace simcuda::nccl

extern "C" const char* ncclGetErrorString(ncclResult_t result) {
  // NCCL's own texts.
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

extern "C" const char* ncclGetLastError(ncclComm_t /*comm*/) { return simcuda::nccl::last_error(); }
