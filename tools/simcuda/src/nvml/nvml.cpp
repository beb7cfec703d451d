// libnvidia-ml.so.1 stand-in: the NVML calls PyTorch and vLLM make about the simulated GPUs.
//
// Rationale
//   PyTorch dlopens NVML and, once a driver is present, calls it unconditionally on some paths
//   (c10's get_fabric_access, reached from expandable segments, calls nvmlInit_v2 through a
//   pointer it does not check), so a driver without NVML crashes the real wheel.
// Approach
//   The ABI is declared here (nvml.h is not part of the CUDA toolkit): opaque device handles,
//   integer return codes, and the few structs these functions fill, laid out as NVML defines
//   them. Answers come from the same configuration as the runtime (names, UUIDs, PCI ids
//   match cudaDeviceProp), memory figures from the simulator's books.
// Limitations
//   Only this process is seen: compute processes list this process alone, and other processes
//   on the same simulated GPU are not counted in used memory. No NVLink, no fabric, no clocks.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "simcuda/core.hpp"

namespace {

using nvml_return = int;
constexpr nvml_return nvml_success = 0;
constexpr nvml_return nvml_error_uninitialized = 1;
constexpr nvml_return nvml_error_invalid_argument = 2;
constexpr nvml_return nvml_error_not_supported = 3;
constexpr nvml_return nvml_error_not_found = 6;
constexpr nvml_return nvml_error_insufficient_size = 7;

struct nvml_device {
  int index = 0;
};
nvml_device g_devices[16];
int g_init_count = 0;

nvml_device* device_handle(int index) {
  g_devices[index].index = index;
  return &g_devices[index];
}

int index_of(void* handle) {
  auto* d = static_cast<nvml_device*>(handle);
  if (d < &g_devices[0] || d >= &g_devices[16] || d->index >= simcuda::machine_device_count()) return -1;
  return d->index;
}

std::string uuid_text(int device) { return simcuda::device_uuid_text(device); }

/// This process's device memory on a machine GPU (none where CUDA_VISIBLE_DEVICES hides it).
std::size_t process_bytes(int device) {
  const int ordinal = simcuda::ordinal_of_machine_device(device);
  return ordinal < 0 ? 0 : simcuda::mapped_bytes(ordinal);
}

/// nvmlMemory_t
struct nvml_memory {
  unsigned long long total, free, used;
};

/// nvmlProcessInfo_v1_t: what the unversioned nvmlDeviceGetComputeRunningProcesses fills.
struct nvml_process_info_v1 {
  unsigned int pid;
  unsigned long long used_gpu_memory;
};

/// nvmlGpuFabricInfo_v2_t (the "V" call's struct): version, clusterUuid[16], status, cliqueId,
/// state, healthMask.
struct nvml_fabric_info_v2 {
  unsigned int version;
  unsigned char cluster_uuid[16];
  nvml_return status;
  unsigned int clique_id;
  unsigned char state;
  unsigned int health_mask;
};
constexpr unsigned char nvml_fabric_state_not_supported = 0;

}  // namespace

extern "C" {

nvml_return nvmlInit_v2(void) {
  ++g_init_count;
  return nvml_success;
}
nvml_return nvmlInit(void) { return nvmlInit_v2(); }
nvml_return nvmlInitWithFlags(unsigned int) { return nvmlInit_v2(); }

nvml_return nvmlShutdown(void) {
  if (g_init_count == 0) return nvml_error_uninitialized;
  --g_init_count;
  return nvml_success;
}

const char* nvmlErrorString(nvml_return result) {
  switch (result) {
    case nvml_success: return "Success";
    case nvml_error_uninitialized: return "Uninitialized";
    case nvml_error_invalid_argument: return "Invalid Argument";
    case nvml_error_not_supported: return "Not Supported";
    case nvml_error_not_found: return "Not Found";
    case nvml_error_insufficient_size: return "Insufficient Size";
    default: return "Unknown Error";
  }
}

nvml_return nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (version == nullptr) return nvml_error_invalid_argument;
  *version = 13020;
  return nvml_success;
}
nvml_return nvmlSystemGetCudaDriverVersion(int* version) { return nvmlSystemGetCudaDriverVersion_v2(version); }

nvml_return nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (version == nullptr || length < 8) return nvml_error_insufficient_size;
  std::snprintf(version, length, "%s", "580.00-simcuda");
  return nvml_success;
}

nvml_return nvmlDeviceGetCount_v2(unsigned int* count) {
  if (count == nullptr) return nvml_error_invalid_argument;
  *count = static_cast<unsigned>(simcuda::machine_device_count());
  return nvml_success;
}

nvml_return nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (device == nullptr || static_cast<int>(index) >= simcuda::machine_device_count()) return nvml_error_invalid_argument;
  *device = device_handle(static_cast<int>(index));
  return nvml_success;
}

nvml_return nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
  if (bus_id == nullptr || device == nullptr) return nvml_error_invalid_argument;
  for (int i = 0; i < simcuda::machine_device_count(); ++i) {
    // PyTorch prints "%04x:%02x:%02x.0" (domain, bus, device); our ids are "0000:BB:00.0".
    std::string ours = simcuda::pci_bus_id(i);
    if (strcasecmp(ours.c_str(), bus_id) == 0 || strcasecmp(("0000" + ours).c_str(), bus_id) == 0) {
      *device = device_handle(i);
      return nvml_success;
    }
  }
  return nvml_error_not_found;
}

nvml_return nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  if (uuid == nullptr || device == nullptr) return nvml_error_invalid_argument;
  for (int i = 0; i < simcuda::machine_device_count(); ++i) {
    if (uuid_text(i) == uuid) {
      *device = device_handle(i);
      return nvml_success;
    }
  }
  return nvml_error_not_found;
}

nvml_return nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  int i = index_of(device);
  if (i < 0 || uuid == nullptr) return nvml_error_invalid_argument;
  std::string text = uuid_text(i);
  if (length < text.size() + 1) return nvml_error_insufficient_size;
  std::memcpy(uuid, text.c_str(), text.size() + 1);
  return nvml_success;
}

nvml_return nvmlDeviceGetIndex(void* device, unsigned int* index) {
  int i = index_of(device);
  if (i < 0 || index == nullptr) return nvml_error_invalid_argument;
  *index = static_cast<unsigned>(i);
  return nvml_success;
}

nvml_return nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  int i = index_of(device);
  if (i < 0 || name == nullptr || length == 0) return nvml_error_invalid_argument;
  std::snprintf(name, length, "%s", simcuda::current_config().gpu.name.c_str());
  return nvml_success;
}

nvml_return nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor) {
  if (index_of(device) < 0 || major == nullptr || minor == nullptr) return nvml_error_invalid_argument;
  const simcuda::gpu_spec& g = simcuda::current_config().gpu;  // as cudaDeviceProp's major/minor
  *major = g.cc_major;
  *minor = g.cc_minor;
  return nvml_success;
}

nvml_return nvmlDeviceGetMemoryInfo(void* device, nvml_memory* memory) {
  int i = index_of(device);
  if (i < 0 || memory == nullptr) return nvml_error_invalid_argument;
  const std::size_t total = simcuda::current_config().gpu.memory_bytes;
  const std::size_t used = process_bytes(i);
  memory->total = total;
  memory->used = used;
  memory->free = total - used;
  return nvml_success;
}

nvml_return nvmlDeviceGetComputeRunningProcesses(void* device, unsigned int* count, nvml_process_info_v1* infos) {
  int i = index_of(device);
  if (i < 0 || count == nullptr) return nvml_error_invalid_argument;
  const std::size_t used = process_bytes(i);
  const unsigned needed = used > 0 ? 1 : 0;
  if (*count < needed || (needed && infos == nullptr)) {
    *count = needed;
    return nvml_error_insufficient_size;
  }
  *count = needed;
  if (needed) infos[0] = {static_cast<unsigned>(getpid()), used};
  return nvml_success;
}

nvml_return nvmlDeviceGetGpuFabricInfoV(void* device, nvml_fabric_info_v2* info) {
  if (index_of(device) < 0 || info == nullptr) return nvml_error_invalid_argument;
  info->state = nvml_fabric_state_not_supported;  // simulated GPUs sit on no NVLink fabric
  info->status = nvml_error_not_supported;
  return nvml_success;
}

nvml_return nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned int, void*) {
  if (index_of(device) < 0) return nvml_error_invalid_argument;
  return nvml_error_not_supported;  // no NVLink: what NVML answers on PCIe-only GPUs
}

nvml_return nvmlDeviceGetNvLinkRemoteDeviceType(void* device, unsigned int, int*) {
  if (index_of(device) < 0) return nvml_error_invalid_argument;
  return nvml_error_not_supported;
}

nvml_return nvmlDeviceGetP2PStatus(void* a, void* b, int, int* status) {
  if (index_of(a) < 0 || index_of(b) < 0 || status == nullptr) return nvml_error_invalid_argument;
  *status = 0;  // NVML_P2P_STATUS_OK: every simulated GPU's memory is host memory
  return nvml_success;
}

}  // extern "C"
