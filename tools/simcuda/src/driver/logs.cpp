// Driver API: error-log callbacks (CUDA 12.9+). PyTorch registers one to forward driver error
// logs. The simulated driver keeps the registrations and delivers its own error lines to them
// (the same lines simcuda prints: unemulated and unsupported calls).
#include <mutex>
#include <vector>

#include "driver.hpp"

namespace {

struct registration {
  CUlogsCallback callback = nullptr;
  void* user_data = nullptr;
};

std::mutex g_mu;
std::vector<registration*>& registrations() {
  static auto* v = new std::vector<registration*>;
  return *v;
}

}  // namespace

extern "C" {

CUresult cuLogsRegisterCallback(CUlogsCallback callback, void* user_data, CUlogsCallbackHandle* handle) {
  if (callback == nullptr || handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* r = new registration{callback, user_data};
  std::lock_guard lock(g_mu);
  registrations().push_back(r);
  *handle = reinterpret_cast<CUlogsCallbackHandle>(r);
  return CUDA_SUCCESS;
}

CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle handle) {
  std::lock_guard lock(g_mu);
  auto& v = registrations();
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (reinterpret_cast<CUlogsCallbackHandle>(*it) == handle) {
      delete *it;
      v.erase(it);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

}  // extern "C"
