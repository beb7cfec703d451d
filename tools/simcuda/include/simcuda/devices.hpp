// The simulated GPUs: ordinals, properties, the current device.
// Part of simcuda's core API (core.hpp gathers it, with the glossary).
#pragma once

#include "simcuda/diagnostics.hpp"

namespace simcuda {

// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------

/// GPUs this process sees (CUDA_VISIBLE_DEVICES of the machine's; src/core/visible_devices.cpp).
/// Every `device` below is a CUDA ordinal of this process.
int device_count() noexcept;
bool valid_device(int device) noexcept;
/// GPUs of the simulated machine (SIMCUDA_GPU count): what NVML lists.
int machine_device_count() noexcept;
/// The machine GPU behind a valid ordinal: its identity across processes (UUID, PCI bus id).
int machine_device(int ordinal) noexcept;
/// The ordinal of a machine GPU in this process, or -1 where CUDA_VISIBLE_DEVICES hides it.
int ordinal_of_machine_device(int machine) noexcept;
/// A machine GPU's UUID, as cudaDeviceProp::uuid and cuDeviceGetUuid give it, and as text
/// ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVML and CUDA_VISIBLE_DEVICES write it).
void device_uuid(int machine, unsigned char bytes[16]) noexcept;
std::string device_uuid_text(int machine);
/// The calling thread's current device (cudaSetDevice), 0 until set.
int current_device() noexcept;
void set_current_device(int device) noexcept;
/// Whether the device's primary context exists (the runtime initialised it: cudaSetDevice,
/// first memory use, or cuDevicePrimaryCtxRetain). PyTorch asks, to avoid creating contexts.
bool device_active(int device) noexcept;
void mark_device_active(int device) noexcept;
/// A device attribute by its CUdevice_attribute / cudaDeviceAttr number (the two enums agree).
/// False for an attribute the simulator does not model (the caller fails loudly).
bool device_attribute(int attribute, int device, int* value) noexcept;
/// "0000:01:00.0"-style PCI bus id of a machine GPU (domain 0, bus 1 + its machine index).
std::string pci_bus_id(int machine);

}  // namespace simcuda
