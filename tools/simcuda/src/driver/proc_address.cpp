// Driver API: cuGetProcAddress, the entry point through which the runtime (and PyTorch, via
// cudaGetDriverEntryPointByVersion) reaches driver functions.
//
// Approach: the newest ABI variant this library exports wins: "name_v9" ... "name_v2", then
// "name". Limitation: a caller asking for an older ABI variant of a function whose signature
// changed gets the newest one; the functions we emulate have one variant in use by CUDA 13.
#include <dlfcn.h>

#include <string>

#include "driver.hpp"

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
  for (int v = 9; v >= 1 && library != nullptr && *function == nullptr; --v) {
    std::string name = v == 1 ? std::string(symbol) : std::string(symbol) + "_v" + std::to_string(v);
    *function = dlsym(library, name.c_str());
  }
  if (status) *status = *function ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *function ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

}  // extern "C"
