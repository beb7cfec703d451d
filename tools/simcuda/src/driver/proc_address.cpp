// Driver API: cuGetProcAddress, the entry point through which the runtime (and PyTorch, via
// cudaGetDriverEntryPointByVersion) reaches driver functions.
//
// Approach: the newest emulated ABI variant this library exports wins: "name_v9" ... "name_v2",
// then "name"; a variant that is only a generated stub (its code lies in the simcuda_stubs
// section, gen/gen_stubs.py) is returned only when no variant is emulated, so the caller's call
// still names the function. The surfaces of packages that name every driver function (Triton)
// export stubs of variants newer than the ones emulated: cuCtxSynchronize_v2 takes a context,
// and a caller that asked for cuCtxSynchronize (CUDA 2.0's) must not get it.
// Limitation: a caller asking for an older ABI variant of a function whose signature changed,
// when both are emulated, gets the newest one; the functions we emulate have one variant in use
// by CUDA 13.
#include <dlfcn.h>

#include <string>

#include "driver.hpp"

extern "C" {
// Bounds of the generated stubs' code in this library (the linker defines them for the section).
extern const char __start_simcuda_stubs[] __attribute__((weak));
extern const char __stop_simcuda_stubs[] __attribute__((weak));
}

namespace {

bool is_stub(void* function) {
  const auto* p = static_cast<const char*>(function);
  return __start_simcuda_stubs != nullptr && p >= __start_simcuda_stubs && p < __stop_simcuda_stubs;
}

}  // namespace

extern "C" {

CUresult cuGetProcAddress(const char* symbol, void** function, int, cuuint64_t,
                          CUdriverProcAddressQueryResult* status) {  // _v2
  if (symbol == nullptr || function == nullptr) return CUDA_ERROR_INVALID_VALUE;
  static void* library = [] {
    Dl_info info{};
    dladdr(reinterpret_cast<void*>(&cuDriverGetVersion), &info);
    return dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  }();
  *function = nullptr;
  void* stub = nullptr;
  for (int v = 9; v >= 1 && library != nullptr && *function == nullptr; --v) {
    std::string name = v == 1 ? std::string(symbol) : std::string(symbol) + "_v" + std::to_string(v);
    void* found = dlsym(library, name.c_str());
    if (found != nullptr && is_stub(found)) {
      if (stub == nullptr) stub = found;
    } else {
      *function = found;
    }
  }
  if (*function == nullptr) *function = stub;
  if (status) *status = *function ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *function ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // extern "C"
