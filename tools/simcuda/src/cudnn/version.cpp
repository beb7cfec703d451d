// libcudnn.so.9 stand-in: versions and error strings only. Every cuDNN computation (convolutions,
// the cuDNN attention backend, ...) is a loud stub: kernels do not run on the simulator, and
// cuDNN's graph API is not emulated. PyTorch compares the runtime version with the one it was
// built against, so the version is the wheel's (surface facts: cudnn = 9.26.0).
#include <cudnn.h>

extern "C" {

size_t cudnnGetVersion(void) { return 9 * 10000 + 26 * 100 + 0; }

size_t cudnnGetCudartVersion(void) { return 13020; }

size_t cudnnGetMaxDeviceVersion(void) { return 1200; }

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED (not emulated by the simulated GPU)";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
  }
}

}  // extern "C"
