// The simulated machine's configuration, SIMCUDA_GPU (src/core/config.cpp).
// Part of simcuda's core API (core.hpp gathers it, with the glossary).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace simcuda {

// ---------------------------------------------------------------------------------------------
// Configuration: SIMCUDA_GPU="count:2,memory:80GiB,name:NVIDIA H100 80GB HBM3,cc:9.0,sms:132,
//                             events:deferred:8,fill:0x00,strict:1,nccl_peers:virtual"
// ---------------------------------------------------------------------------------------------

struct gpu_spec {
  std::string name = "NVIDIA H100 80GB HBM3 (simcuda)";
  int cc_major = 9;
  int cc_minor = 0;
  int sm_count = 132;
  std::size_t memory_bytes = std::size_t{80} << 30;  ///< totalGlobalMem, cudaMemGetInfo's total
  int clock_khz = 1980000;
  int memory_clock_khz = 2619000;
  int memory_bus_width_bits = 5120;
  std::size_t l2_cache_bytes = std::size_t{50} << 20;
  std::size_t shared_memory_per_block_bytes = 48 << 10;
  std::size_t shared_memory_per_block_optin_bytes = 227 << 10;
  std::size_t shared_memory_per_sm_bytes = 228 << 10;
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int warp_size = 32;
  int regs_per_block = 65536;
};

enum class event_mode {
  at_record,  ///< an event is complete as soon as it is recorded (work ran at the call)
  deferred,   ///< complete after `deferred_ticks` later ticks on any stream, or at a synchronize
  at_sync,    ///< complete only at an explicit synchronize (device, stream or event)
};

/// values:LEVEL, whether operations' outputs are real values. The values are computed above the
/// CUDA layer, by the value mode PyTorch jobs load (tools/simcuda/python/); the level is parsed here
/// so a bad one is refused with the rest of the configuration, and the value mode asks for it
/// through simcuda_value_level().
enum class value_level {
  off,         ///< kernels are skipped: outputs hold whatever the memory held
  observable,  ///< every output is real except the heavy floating-point products (a stand-in)
  exact,       ///< every output is real
};

/// The level a job gets when SIMCUDA_GPU names none.
inline constexpr value_level default_value_level = value_level::observable;

/// "off", "observable" or "exact".
const char* value_level_name(value_level level) noexcept;

struct config {
  int device_count = 1;
  gpu_spec gpu;
  event_mode events = event_mode::at_record;
  std::uint64_t deferred_ticks = 8;
  std::optional<std::uint8_t> fill_byte;  ///< written over new allocations (costs RAM) when set
  bool strict = false;  ///< abort (after the message) when an unemulated function is called
  bool quiet = false;   ///< no start-up banner
  value_level values = default_value_level;
  /// host_vmm:0 plays a driver older than CUDA 12.2: no host-located cuMemCreate (the
  /// HOST_*_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED attributes read 0, a host location is refused).
  bool host_vmm = true;
  /// nccl_peers:virtual runs one rank of a job whose other ranks are absent: every communicator of
  /// this process is complete without them, and a collective answers as if every rank held this
  /// rank's values (src/nccl/README.md, Note [virtual peers]).
  bool nccl_virtual_peers = false;
};

/// The configuration, parsed once from SIMCUDA_GPU on first use. A malformed value prints one
/// line naming the key and the valid form, then exits the process with status 2: a job must not
/// run on a GPU it did not ask for.
const config& current_config();

/// Parses a SIMCUDA_GPU string; on failure returns nullopt and sets `error`.
std::optional<config> parse_config(const std::string& text, std::string& error);

}  // namespace simcuda
