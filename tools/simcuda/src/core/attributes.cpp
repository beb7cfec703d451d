// Device attributes (cuDeviceGetAttribute / cudaDeviceGetAttribute share these numbers).
// Everything answered comes from the configured gpu_spec or from the architecture it names;
// an attribute not in this table is refused loudly by the caller rather than answered with 0.
#include <cuda.h>

#include <cstdio>

#include "simcuda/core.hpp"

namespace simcuda {

bool device_attribute(int attribute, int device, int* value) noexcept {
  if (!valid_device(device) || value == nullptr) return false;
  const gpu_spec& g = current_config().gpu;
  const bool hopper_or_newer = g.cc_major >= 9;
  int v = 0;
  switch (static_cast<CUdevice_attribute>(attribute)) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = g.max_threads_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = static_cast<int>(g.shared_memory_per_block_bytes); break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = g.warp_size; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = g.regs_per_block; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = g.clock_khz; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: v = 512; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = g.sm_count; break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: v = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = 1 + machine_device(device); break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = g.memory_clock_khz; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = g.memory_bus_width_bits; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = static_cast<int>(g.l2_cache_bytes); break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = g.max_threads_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 3; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = g.cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = g.cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: v = static_cast<int>(g.shared_memory_per_sm_bytes); break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: v = 0; break;  // cudaMallocManaged is not emulated
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: v = device; break;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: v = 2; break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: v = static_cast<int>(g.shared_memory_per_block_optin_bytes); break;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: v = static_cast<int>(g.l2_cache_bytes * 3 / 4); break;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: v = 134213632; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 0; break;  // cudaMallocAsync pools are not emulated
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: v = hopper_or_newer ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: v = -1; break;
    // Host-located cuMemCreate (vmm.cpp): host memory mapped at device addresses.
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = current_config().host_vmm ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: v = 4; break;
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: v = hopper_or_newer ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED: v = 0; break;
    default: return false;
  }
  *value = v;
  return true;
}

std::string pci_bus_id(int machine) {
  char text[32];
  std::snprintf(text, sizeof text, "0000:%02x:00.0", 1 + machine);
  return text;
}

}  // namespace simcuda
