// Runtime API: module registration (nvcc's __cudaRegister* calls run when torch's libraries
// load), kernel launches (validated, counted and skipped: values are meaningless on the
// simulator, allocation behaviour is not), function attributes, occupancy and symbols. A launch
// on a capturing stream becomes a kernel node (graph.cpp).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime.hpp"

using namespace simcuda;
using namespace simcuda::rt;

namespace {

struct symbol_record {
  char* host = nullptr;
  std::size_t bytes = 0;
};

struct registry {
  std::mutex mu;
  std::unordered_map<const void*, std::string> functions;  ///< host stub -> kernel name
  std::unordered_map<const void*, symbol_record> symbols;  ///< host shadow -> record
  std::unordered_map<const void*, int> max_dynamic_shared;
};

registry& the_registry() {
  static registry* r = new registry;
  return *r;
}

struct call_configuration {
  dim3 grid, block;
  std::size_t shared_bytes = 0;
  void* stream = nullptr;
};
thread_local std::vector<call_configuration> t_configurations;

bool registered(const void* function) {
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  return r.functions.count(function) != 0;
}

cudaError_t launch(const void* function, dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t handle) {
  if (function == nullptr) return result(cudaErrorInvalidDeviceFunction);
  stream* s = stream_of(handle);
  if (s == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (!launch_shape_valid(grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                          current_config().gpu.shared_memory_per_block_optin_bytes))
    return result(cudaErrorInvalidConfiguration);
  return result(from(launch_kernel(s, legacy_handle(handle), function)));
}

}  // namespace

extern "C" {

void** __cudaRegisterFatBinary(void* fat_cubin) {
  count_fat_binary();
  auto** handle = new void*;
  *handle = fat_cubin;
  return handle;
}

void __cudaRegisterFatBinaryEnd(void**) {}

void __cudaUnregisterFatBinary(void** handle) { delete handle; }

void __cudaRegisterFunction(void**, const char* host_function, char*, const char* device_name, int, uint3*, uint3*,
                            dim3*, dim3*, int*) {
  count_function_registered();
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  r.functions[host_function] = device_name ? device_name : "?";
}

void __cudaRegisterVar(void**, char* host_var, char*, const char*, int, size_t size, int, int) {
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  r.symbols[host_var] = {host_var, size};
}

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared_bytes, struct CUstream_st* stream) {
  t_configurations.push_back({grid, block, shared_bytes, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared_bytes, void* stream) {
  if (t_configurations.empty()) return result(cudaErrorMissingConfiguration);
  call_configuration c = t_configurations.back();
  t_configurations.pop_back();
  *grid = c.grid;
  *block = c.block;
  *shared_bytes = c.shared_bytes;
  *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  if (kernel == nullptr) return result(cudaErrorInvalidValue);
  if (!registered(function)) return result(cudaErrorInvalidDeviceFunction);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(function));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void**, size_t shared_bytes,
                               cudaStream_t stream) {
  return launch(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, stream);
}

cudaError_t cudaLaunchKernel(const void* function, dim3 grid, dim3 block, void**, size_t shared_bytes,
                             cudaStream_t stream) {
  return launch(function, grid, block, shared_bytes, stream);
}

cudaError_t cudaLaunchCooperativeKernel(const void* function, dim3 grid, dim3 block, void**, size_t shared_bytes,
                                        cudaStream_t stream) {
  return launch(function, grid, block, shared_bytes, stream);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* function, void**) {
  if (config == nullptr) return result(cudaErrorInvalidValue);
  return launch(function, config->gridDim, config->blockDim, config->dynamicSmemBytes, config->stream);
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* function) {
  if (attributes == nullptr) return result(cudaErrorInvalidValue);
  if (!registered(function)) return result(cudaErrorInvalidDeviceFunction);
  const gpu_spec& g = current_config().gpu;
  std::memset(attributes, 0, sizeof *attributes);
  attributes->maxThreadsPerBlock = g.max_threads_per_block;
  attributes->numRegs = 32;
  attributes->binaryVersion = g.cc_major * 10 + g.cc_minor;
  attributes->ptxVersion = g.cc_major * 10 + g.cc_minor;
  attributes->cacheModeCA = 0;
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  auto it = r.max_dynamic_shared.find(function);
  attributes->maxDynamicSharedSizeBytes = it == r.max_dynamic_shared.end() ? 48 << 10 : it->second;
  attributes->preferredShmemCarveout = -1;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attribute, int value) {
  if (!registered(function)) return result(cudaErrorInvalidDeviceFunction);
  const gpu_spec& g = current_config().gpu;
  if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<std::size_t>(value) > g.shared_memory_per_block_optin_bytes)
      return result(cudaErrorInvalidValue);
    registry& r = the_registry();
    std::lock_guard lock(r.mu);
    r.max_dynamic_shared[function] = value;
    return cudaSuccess;
  }
  if (attribute == cudaFuncAttributePreferredSharedMemoryCarveout)
    return value >= -1 && value <= 100 ? cudaSuccess : result(cudaErrorInvalidValue);
  if (attribute == cudaFuncAttributeNonPortableClusterSizeAllowed || attribute == cudaFuncAttributeRequiredClusterWidth ||
      attribute == cudaFuncAttributeRequiredClusterHeight || attribute == cudaFuncAttributeRequiredClusterDepth ||
      attribute == cudaFuncAttributeClusterSchedulingPolicyPreference)
    return cudaSuccess;
  return not_supported("cudaFuncSetAttribute", "this function attribute is not modelled");
}

cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t kernel, cudaFuncAttribute attribute, int value, int device) {
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* function, int block_size,
                                                                   size_t dynamic_shared_bytes, unsigned int) {
  if (blocks == nullptr || block_size <= 0) return result(cudaErrorInvalidValue);
  if (!registered(function)) return result(cudaErrorInvalidDeviceFunction);
  const gpu_spec& g = current_config().gpu;
  if (block_size > g.max_threads_per_block) {
    *blocks = 0;
    return cudaSuccess;
  }
  // Threads and shared memory bound it (registers: 32 per thread, never the bound here).
  int by_threads = g.max_threads_per_sm / block_size;
  int by_shared = dynamic_shared_bytes == 0
                      ? 32
                      : static_cast<int>(g.shared_memory_per_sm_bytes / (dynamic_shared_bytes + 1024));
  *blocks = std::max(0, std::min({32, by_threads, by_shared}));
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* function, int block_size,
                                                          size_t dynamic_shared_bytes) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, function, block_size, dynamic_shared_bytes, 0);
}

/// A __device__ variable's storage is its host shadow (registered by nvcc's start-up code):
/// copies to it are real, and kernels that would read it do not run.
cudaError_t cudaGetSymbolAddress(void** pointer, const void* symbol) {
  if (pointer == nullptr) return result(cudaErrorInvalidValue);
  registry& r = the_registry();
  std::lock_guard lock(r.mu);
  auto it = r.symbols.find(symbol);
  if (it == r.symbols.end()) return result(cudaErrorInvalidSymbol);
  *pointer = it->second.host;
  return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t bytes, size_t offset, cudaMemcpyKind kind) {
  if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault)
    return result(cudaErrorInvalidMemcpyDirection);
  if (cudaError_t e = result(from(check_unsafe_call())); e != cudaSuccess) return e;  // synchronous
  symbol_record record;
  {
    registry& r = the_registry();
    std::lock_guard lock(r.mu);
    auto it = r.symbols.find(symbol);
    if (it == r.symbols.end()) return result(cudaErrorInvalidSymbol);
    record = it->second;
  }
  if (offset > record.bytes || bytes > record.bytes - offset) return result(cudaErrorInvalidValue);
  std::memcpy(record.host + offset, src, bytes);
  count_memcpy(bytes);
  tick();
  return cudaSuccess;
}

cudaError_t cudaProfilerStart(void) { return cudaSuccess; }  // no profiler attaches to a simulated GPU
cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

}  // extern "C"
