// Runtime API: devices, properties, versions, memory info and driver entry points.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "runtime.hpp"

using namespace simcuda;
using namespace simcuda::rt;

namespace {

/// The CUDA version this runtime stands in for: the one the wheel was built against (13.2).
constexpr int runtime_version = 13020;
constexpr int driver_version = 13020;

cudaError_t check_device(int device) {
  return valid_device(device) ? cudaSuccess : result(cudaErrorInvalidDevice);
}


}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return result(cudaErrorInvalidValue);
  *count = device_count();
  return *count == 0 ? result(cudaErrorNoDevice) : cudaSuccess;  // CUDA_VISIBLE_DEVICES="" or none that exists
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return result(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = check_device(device)) return e;
  set_current_device(device);
  return cudaSuccess;
}

cudaError_t cudaInitDevice(int device, unsigned int, unsigned int) { return check_device(device); }

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return result(cudaErrorInvalidValue);
  *version = driver_version;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return result(cudaErrorInvalidValue);
  *version = runtime_version;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return result(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(device)) return e;
  if (!device_attribute(attr, device, value)) {
    char why[64];
    std::snprintf(why, sizeof why, "device attribute %d is not modelled", static_cast<int>(attr));
    return not_supported("cudaDeviceGetAttribute", why);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return result(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(device)) return e;
  const gpu_spec& g = current_config().gpu;
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "%s", g.name.c_str());
  device_uuid(machine_device(device), reinterpret_cast<unsigned char*>(prop->uuid.bytes));
  prop->totalGlobalMem = g.memory_bytes;
  prop->sharedMemPerBlock = g.shared_memory_per_block_bytes;
  prop->regsPerBlock = g.regs_per_block;
  prop->warpSize = g.warp_size;
  prop->memPitch = 2147483647;
  prop->maxThreadsPerBlock = g.max_threads_per_block;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->totalConstMem = 65536;
  prop->major = g.cc_major;
  prop->minor = g.cc_minor;
  prop->textureAlignment = 512;
  prop->texturePitchAlignment = 32;
  prop->multiProcessorCount = g.sm_count;
  prop->integrated = 0;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  prop->ECCEnabled = 1;
  prop->pciBusID = 1 + machine_device(device);
  prop->asyncEngineCount = 3;
  prop->unifiedAddressing = 1;
  prop->memoryBusWidth = g.memory_bus_width_bits;
  prop->l2CacheSize = static_cast<int>(g.l2_cache_bytes);
  prop->persistingL2CacheMaxSize = static_cast<int>(g.l2_cache_bytes * 3 / 4);
  prop->maxThreadsPerMultiProcessor = g.max_threads_per_sm;
  prop->streamPrioritiesSupported = 1;
  prop->globalL1CacheSupported = 1;
  prop->localL1CacheSupported = 1;
  prop->sharedMemPerMultiprocessor = g.shared_memory_per_sm_bytes;
  prop->regsPerMultiprocessor = 65536;
  prop->managedMemory = 0;
  prop->multiGpuBoardGroupID = device;
  prop->pageableMemoryAccess = 0;
  prop->concurrentManagedAccess = 0;
  prop->computePreemptionSupported = 1;
  prop->canUseHostPointerForRegisteredMem = 1;
  prop->cooperativeLaunch = 1;
  prop->sharedMemPerBlockOptin = g.shared_memory_per_block_optin_bytes;
  prop->maxBlocksPerMultiProcessor = 32;
  prop->accessPolicyMaxWindowSize = 134213632;
  prop->reservedSharedMemPerBlock = 1024;
  prop->hostRegisterSupported = 1;
  prop->memoryPoolsSupported = 0;
  prop->gpuDirectRDMASupported = 0;
  prop->clusterLaunch = g.cc_major >= 9 ? 1 : 0;
  prop->unifiedFunctionPointers = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* pci_bus, int len, int device) {
  if (pci_bus == nullptr || len <= 0) return result(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(device)) return e;
  std::snprintf(pci_bus, static_cast<std::size_t>(len), "%s", pci_bus_id(machine_device(device)).c_str());
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  // Invalid while any stream of the device captures (whatever the thread's mode).
  if (cudaError_t e = result(from(check_device_sync(current_device()))); e != cudaSuccess) return e;
  synchronize_device(current_device());
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  const int device = current_device();
  const std::size_t capacity = current_config().gpu.memory_bytes;
  const std::size_t used = mapped_bytes(device);
  if (free) *free = capacity - std::min(capacity, used);
  if (total) *total = capacity;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  if (can_access == nullptr) return result(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(device)) return e;
  if (cudaError_t e = check_device(peer)) return e;
  *can_access = device != peer ? 1 : 0;  // every simulated GPU's memory is host memory
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (flags != 0) return result(cudaErrorInvalidValue);
  if (cudaError_t e = check_device(peer)) return e;
  if (peer == current_device()) return result(cudaErrorInvalidDevice);
  return cudaSuccess;
}

/// Driver functions come from our libcuda.so.1 (a DT_NEEDED of this library), through its
/// cuGetProcAddress, so the runtime and the driver resolve names one way.
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** func, unsigned int version,
                                             unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status) {
  if (symbol == nullptr || func == nullptr) return result(cudaErrorInvalidValue);
  CUdriverProcAddressQueryResult query{};
  CUresult r = cuGetProcAddress(symbol, func, static_cast<int>(version), flags, &query);
  if (status) *status = r == CUDA_SUCCESS ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

}  // extern "C"
