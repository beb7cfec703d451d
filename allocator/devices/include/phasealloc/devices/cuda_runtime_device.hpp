// cuda_runtime_device: whole segments with cudaMalloc / cudaFree (PyTorch's default mechanism).
//
// caps(): has_virtual_reserve = false, has_partial_unmap = false, so reserve() returns address
// space and memory at once, release() frees both, and map()/unmap() answer not_supported.
// granularity_bytes is the alignment cudaMalloc guarantees: the device's texture alignment
// (cudaDevAttrTextureAlignment, 512 bytes on every GPU since Fermi; at least 256, the CUDA
// programming guide's floor). It is an alignment, not the driver's page size: the driver backs
// large cudaMallocs with 2 MiB pages, so the policy (not the device) decides segment sizes.
// capacity_bytes is cudaMemGetInfo's total; free_bytes() its free (other processes count).
//
// Streams are cudaStream_t values cast to stream_id (0: the legacy default stream). Events are
// cudaEventDisableTiming events named by small ids that are never reused, so a stale or unknown id
// answers invalid_argument instead of reaching the runtime.
//
// This header includes no CUDA header: the runtime types live in the .cpp.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "phasealloc/device.hpp"

namespace phasealloc {

class cuda_runtime_device final : public device {
 public:
  /// A device for GPU `ordinal`, after checking it can be used: not_supported when there is no
  /// driver or no GPU, invalid_argument for an ordinal out of range, device_refused when the
  /// runtime fails to start on it. `why`, when given, receives the reason of a failure.
  static result<std::unique_ptr<cuda_runtime_device>> create(int ordinal, std::string* why = nullptr) noexcept;

  /// Assumes GPU `ordinal` is usable (create() checks it; prefer create()).
  explicit cuda_runtime_device(int ordinal) noexcept;
  /// Frees whatever is still reserved and destroys live events (errors ignored: at process exit
  /// the runtime may already be gone).
  ~cuda_runtime_device() override;
  cuda_runtime_device(const cuda_runtime_device&) = delete;
  cuda_runtime_device& operator=(const cuda_runtime_device&) = delete;

  // --- device ---------------------------------------------------------------------------------
  std::string_view name() const noexcept override { return "cuda_runtime"; }
  const device_caps& caps() const noexcept override { return caps_; }

  /// cudaMalloc. cudaErrorMemoryAllocation -> out_of_memory (the error is cleared).
  result<device_address> reserve(std::size_t bytes) noexcept override;
  /// cudaFree of a live reservation named by its exact base and size; anything else is invalid_argument.
  errc release(device_address base, std::size_t bytes) noexcept override;
  errc map(device_address addr, std::size_t bytes) noexcept override;    ///< not_supported.
  errc unmap(device_address addr, std::size_t bytes) noexcept override;  ///< not_supported.
  std::size_t free_bytes() const noexcept override;

  result<event_id> create_event() noexcept override;
  errc record_event(event_id event, stream_id stream) noexcept override;
  result<bool> query_event(event_id event) noexcept override;
  errc synchronize_event(event_id event) noexcept override;
  void destroy_event(event_id event) noexcept override;
  errc synchronize() noexcept override;  ///< cudaDeviceSynchronize.

  // --- cuda_runtime only ------------------------------------------------------------------------
  int ordinal() const noexcept { return ordinal_; }
  /// The last failed CUDA call with its error, e.g. "cudaMalloc(2097152) failed: cudaErrorMemoryAllocation
  /// (out of memory)"; empty when none failed. For error reports.
  std::string last_failure() const override;

 private:
  struct state;  // CUDA handles and the books; defined in the .cpp

  int ordinal_;
  device_caps caps_;
  std::unique_ptr<state> state_;
};

}  // namespace phasealloc
