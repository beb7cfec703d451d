// cuda_vmm_device: the CUDA virtual memory management API (cuMemAddressReserve / cuMemCreate /
// cuMemMap / cuMemSetAccess / cuMemUnmap / cuMemRelease / cuMemAddressFree), page-granular
// (restored ranges in chunks: unmap_span).
//
// caps(): has_virtual_reserve = true, has_partial_unmap = true. reserve() takes address space
// only; map() backs any page-aligned subrange of a reservation with one physical handle per page;
// unmap() returns any mapped subrange; release() needs the reservation wholly unmapped.
// granularity_bytes is the page: the driver's minimum allocation granularity (2 MiB on current
// GPUs) unless cuda_vmm_options::page_bytes asks for a larger power-of-two multiple of it.
//
// The driver is never linked: its entry points are resolved at run time through the CUDA
// runtime (cudaGetDriverEntryPointByVersion), so the library loads on a machine without a
// driver and create() answers not_supported there. Streams are CUstream / cudaStream_t values
// cast to stream_id (0: the legacy default stream).
//
// This header includes no CUDA header: driver types live in the .cpp. The design note (Rationale /
// Approach / Limitations) is at the top of src/cuda_vmm_device.cpp.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "phasealloc/device.hpp"

namespace phasealloc {

namespace detail {
struct cuda_driver_api;  // src/cuda_driver_api.hpp: the driver entry points, a test seam
}  // namespace detail

struct cuda_vmm_options {
  /// Bytes per physical handle, which is also caps().granularity_bytes. 0: the driver's minimum
  /// granularity. Otherwise a power-of-two multiple of it (e.g. 16 or 32 MiB, to trade unmap
  /// precision for fewer driver calls, like PyTorch's 20 MiB large-pool pages).
  std::size_t page_bytes = 0;
  /// Host-located memory kept for the next offload once a range is restored or unmapped (pinned
  /// memory is slow to take: the next offload copies into memory already in place). Beyond it the
  /// oldest kept handles are released. 0 keeps none.
  std::size_t host_cache_bytes = 16 * gib;
  /// Largest physical handle a restore makes (rounded down to whole pages, at least one): a
  /// restored range comes back in handles of this size, one cuMemCreate + cuMemMap each, instead
  /// of one per page, and is unmapped in them (unmap_span). 64 MiB: about 32 driver calls per GiB
  /// each way.
  std::size_t restore_chunk_bytes = 64 * mib;
};

class cuda_vmm_device final : public device {
 public:
  /// A device for GPU `ordinal` on the installed driver: not_supported when there is no driver,
  /// no GPU, or the GPU lacks CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED;
  /// invalid_argument for an ordinal out of range or a bad page_bytes; device_refused when a
  /// driver call fails. `why`, when given, receives the reason of a failure.
  static result<std::unique_ptr<cuda_vmm_device>> create(int ordinal, cuda_vmm_options options = {},
                                                         std::string* why = nullptr) noexcept;

  /// Test seam: the same as create() on a given driver table (a fake one in unit tests). The
  /// device keeps a copy of the table.
  static result<std::unique_ptr<cuda_vmm_device>> create_with_driver(const detail::cuda_driver_api& driver,
                                                                     int ordinal, cuda_vmm_options options = {},
                                                                     std::string* why = nullptr) noexcept;

  /// Unmaps and releases whatever is still mapped, frees the address space, destroys live events
  /// and releases the primary context (errors ignored: at exit the driver may be gone).
  ~cuda_vmm_device() override;
  cuda_vmm_device(const cuda_vmm_device&) = delete;
  cuda_vmm_device& operator=(const cuda_vmm_device&) = delete;

  // --- device ---------------------------------------------------------------------------------
  std::string_view name() const noexcept override { return "cuda_vmm"; }
  const device_caps& caps() const noexcept override { return caps_; }

  /// cuMemAddressReserve, aligned to the page.
  result<device_address> reserve(std::size_t bytes) noexcept override;
  /// cuMemAddressFree of a live, wholly unmapped reservation named by its exact base and size.
  errc release(device_address base, std::size_t bytes) noexcept override;
  /// Per page cuMemCreate + cuMemMap, then one cuMemSetAccess. All or nothing: on a failure the
  /// pages this call mapped are unmapped and released again. CUDA_ERROR_OUT_OF_MEMORY -> out_of_memory.
  errc map(device_address addr, std::size_t bytes) noexcept override;
  /// cuMemUnmap of each mapping in the range (a page's, or a restored chunk's: the range must hold
  /// whole ones, see unmap_span), then cuMemRelease of its handle. Does not synchronize: the engine
  /// calls synchronize() first when streams may still touch the memory (unlike cudaFree, cuMemUnmap
  /// does not wait).
  errc unmap(device_address addr, std::size_t bytes) noexcept override;
  /// [lo, hi) trimmed inward to the edges of the restored chunks it cuts.
  byte_range unmap_span(device_address lo, device_address hi) const noexcept override;
  std::size_t free_bytes() const noexcept override;  ///< cuMemGetInfo's free.

  result<event_id> create_event() noexcept override;
  errc record_event(event_id event, stream_id stream) noexcept override;
  result<bool> query_event(event_id event) noexcept override;
  errc synchronize_event(event_id event) noexcept override;
  void destroy_event(event_id event) noexcept override;
  errc synchronize() noexcept override;  ///< cuCtxSynchronize on the device's primary context.
  /// cuMemSetAccess for `peer` over every mapped page; later maps name it too.
  errc grant_peer_access(int peer) noexcept override;

  /// Same-address offload (cuda_vmm_offload.cpp): one host-located handle per offloaded range,
  /// mapped first at a staging range to receive the copies (cuMemcpyAsync on the device's copy
  /// stream, after `after`), then over the range in place of its device pages. restore maps new
  /// device pages at the range and copies back from the host handle mapped at a staging range.
  /// Without host-located handles (a driver before CUDA 12.2: caps().offload_unmaps) the copies go
  /// through a reused page-locked buffer and the range stays unmapped until its restore.
  errc offload(device_address addr, std::size_t bytes, std::span<const byte_range> live,
               std::span<const event_id> after) noexcept override;
  errc restore(device_address addr, std::size_t bytes, std::span<const byte_range> live,
               std::span<const event_id> after) noexcept override;
  /// The two-step forms: the copies are enqueued on the copy stream and an event recorded after
  /// them; finish_move waits for it (an offload then swaps the mappings, a restore drops its staging).
  errc offload_start(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                     std::span<const event_id> after) noexcept override;
  errc restore_start(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                     std::span<const event_id> after) noexcept override;
  result<bool> move_done(device_address addr) noexcept override;
  errc finish_move(device_address addr, std::span<const event_id> after) noexcept override;
  errc order_after_move(device_address addr, stream_id stream) noexcept override;
  /// Moves in flight now (started, not finished).
  std::size_t moves_in_flight() const noexcept;
  std::size_t host_backed_bytes() const noexcept override;
  moved_bytes moved() const noexcept override;
  /// Host memory held now (host-located handles, or page-locked buffers): behind offloaded ranges
  /// and kept for reuse (host_cache_bytes).
  std::size_t host_held_bytes() const noexcept;

  /// The driver table, context, handles and the books (src/cuda_vmm_state.hpp; opaque here).
  struct state;

  // --- cuda_vmm only ----------------------------------------------------------------------------
  int ordinal() const noexcept { return ordinal_; }
  /// Bytes mapped through this device (its own books; free_bytes() asks the driver).
  std::size_t mapped_bytes() const noexcept;
  std::size_t live_reservations() const noexcept;
  /// The last failed driver call with its error, e.g. "cuMemCreate(2097152) failed:
  /// CUDA_ERROR_OUT_OF_MEMORY"; empty when none failed. For error reports.
  std::string last_failure() const override;

 private:

  cuda_vmm_device(int ordinal, device_caps caps, std::unique_ptr<state> s) noexcept;
  /// Whether the driver and GPU can back device addresses with host memory (cuMemCreate at a host
  /// location, CUDA 12.2+, and the table's offload entries); fills the host-located handle's
  /// properties when they can (cuda_vmm_offload.cpp).
  static bool probe_host_backing(state& s) noexcept;

  int ordinal_;
  device_caps caps_;
  std::unique_ptr<state> state_;
};

}  // namespace phasealloc
