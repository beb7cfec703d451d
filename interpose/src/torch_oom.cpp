// The companion library libphasealloc_torch_oom.so: throws c10::OutOfMemoryError, the exception
// PyTorch turns into torch.cuda.OutOfMemoryError. Built only against a torch install's c10 (see
// allocation_failure.hpp for why it is a separate library, and interpose/CMakeLists.txt).
//
// C10_THROW_ERROR is the macro TORCH_CHECK_WITH expands to in every c10 since 1.13: it builds the
// error from a SourceLocation and the message, the constructor that exists in every version.
#include <string>

#include <c10/util/Exception.h>

extern "C" __attribute__((visibility("default"))) [[noreturn]] void phasealloc_throw_torch_oom(const char* message) {
  C10_THROW_ERROR(OutOfMemoryError, std::string(message != nullptr ? message : "CUDA out of memory."));
}
