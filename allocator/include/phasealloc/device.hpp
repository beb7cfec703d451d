// The device contract: where the engine's bytes come from.
//
// Every primitive is noexcept and returns errors as values; errc::ok is success. The engine is
// the only caller and serialises its calls under its own lock, so a device need not be
// thread-safe unless it is shared between engines (the model device and CUDA devices are, for counters).
//
// Address space and memory are separate steps, as in mimalloc's prim.h and CUDA's VMM API:
//
//   reserve(bytes)        -> base       address space only when caps().has_virtual_reserve;
//                                       otherwise address space AND memory (cudaMalloc).
//   map(addr, bytes)                    back [addr, addr+bytes) of a reservation with memory.
//   unmap(addr, bytes)                  return that memory; the addresses stay reserved.
//   release(base, bytes)                give the reservation back. With virtual reserve every
//                                       granule must already be unmapped; without, this frees
//                                       the memory too (cudaFree).
//
// Preconditions (the engine keeps them; a device may check them and answer invalid_argument):
// sizes and addresses of map/unmap/reserve are multiples of caps().granularity_bytes; map and
// unmap name ranges inside one live reservation; without has_partial_unmap, unmap names a whole
// reservation. Without has_virtual_reserve, map and unmap answer not_supported.
//
// A call that fails changes nothing: a map that fails half way unmaps what it mapped.
//
// Same-address offload (caps().has_host_backing), the mechanism under phasealloc's offload:
//
//   offload(addr, bytes, live, after)   the range's memory moves to host memory that stays mapped at
//                                       the same addresses (a kernel that touches it reads and
//                                       writes the right bytes, over the link); only the `live`
//                                       byte ranges are copied, after the `after` events.
//   restore(addr, bytes, live, after)   device memory back under the range, `live` copied back
//                                       once the `after` events completed.
//
// Without host backing, a device may still move the bytes (caps().offload_unmaps): the range is
// then unmapped while offloaded (an access faults, as it would after any unmap), the rest alike.
//
// offload names mapped device pages inside one reservation; restore names one whole range an
// offload moved, and so does an unmap of host-backed pages. Bytes outside `live` are undefined after
// either move. A move that fails changes nothing: after a failed restore (out of memory) the bytes
// are still on the host, at their addresses.
//
// Events: create_event makes a reusable marker; record_event places it on a stream; query_event
// says whether the work enqueued before it has completed (an event never recorded has);
// synchronize_event waits for that.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc {

/// What a device can do (mimalloc's mi_os_mem_config_t in spirit).
struct device_caps {
  std::size_t granularity_bytes = 2 * mib;  ///< Unit of reserve/map/unmap sizes and addresses.
  std::size_t capacity_bytes = 0;           ///< Total memory of the device.
  bool has_virtual_reserve = false;         ///< reserve() takes address space only; map() adds memory.
  bool has_partial_unmap = false;           ///< map/unmap may name any granule-aligned subrange.
  bool has_host_backing = false;            ///< offload/restore: host memory mapped at device addresses.
  /// offload/restore without host backing (a driver before CUDA 12.2): an offloaded range is
  /// unmapped until restored, its bytes in host memory; a kernel that touches it faults.
  bool offload_unmaps = false;
};

/// Whether a device can offload at all (host-backed, or unmapping).
inline bool can_offload(const device_caps& caps) noexcept { return caps.has_host_backing || caps.offload_unmaps; }

/// A run of bytes at device addresses.
struct byte_range {
  device_address addr = 0;
  std::size_t bytes = 0;
};

/// Whether `ranges` lie inside [addr, addr+bytes), non-empty, in address order, not overlapping:
/// what offload and restore take as `live`.
inline bool ranges_inside(std::span<const byte_range> ranges, device_address addr, std::size_t bytes) noexcept {
  device_address cursor = addr;
  for (const byte_range& r : ranges) {
    if (r.bytes == 0 || r.addr < cursor || r.addr + r.bytes < r.addr || r.addr + r.bytes > addr + bytes) return false;
    cursor = r.addr + r.bytes;
  }
  return true;
}

/// The bytes of `ranges`, summed.
inline std::size_t total_bytes(std::span<const byte_range> ranges) noexcept {
  std::size_t sum = 0;
  for (const byte_range& r : ranges) sum += r.bytes;
  return sum;
}

class device {
 public:
  virtual ~device() = default;

  /// A short name for reports: "model", "cuda_runtime", "cuda_vmm".
  virtual std::string_view name() const noexcept = 0;
  virtual const device_caps& caps() const noexcept = 0;

  // --- address space and memory --------------------------------------------------------------
  virtual result<device_address> reserve(std::size_t bytes) noexcept = 0;
  virtual errc release(device_address base, std::size_t bytes) noexcept = 0;
  virtual errc map(device_address addr, std::size_t bytes) noexcept = 0;
  virtual errc unmap(device_address addr, std::size_t bytes) noexcept = 0;

  /// Lets the device of ordinal `peer` (same machine) read and write this device's memory: what is
  /// mapped now and whatever map() adds later. Memory the runtime allocated whole (cudaMalloc) is
  /// reachable once the runtime enabled peer access, so such devices have nothing to do (ok).
  virtual errc grant_peer_access(int /*peer*/) noexcept { return errc::ok; }

  /// The widest [a, b) inside page-aligned [lo, hi) that unmap() may name now. A device whose
  /// physical mappings are all one page answers [lo, hi); one that maps some ranges in larger
  /// handles (cuda_vmm after a restore) trims the edges that would cut one (bytes 0: none fits).
  virtual byte_range unmap_span(device_address lo, device_address hi) const noexcept {
    return byte_range{lo, hi > lo ? hi - lo : 0};
  }

  /// Bytes of memory the device could still map (or cudaMalloc) now.
  virtual std::size_t free_bytes() const noexcept = 0;

  // --- same-address offload (can_offload(caps()); not_supported otherwise) ---------------------
  /// `live`: ranges inside [addr, addr+bytes), in address order, not overlapping; `after`: events
  /// whose work must complete before the move (the streams that used the bytes).
  virtual errc offload(device_address /*addr*/, std::size_t /*bytes*/, std::span<const byte_range> /*live*/,
                       std::span<const event_id> /*after*/) noexcept {
    return errc::not_supported;
  }
  virtual errc restore(device_address /*addr*/, std::size_t /*bytes*/, std::span<const byte_range> /*live*/,
                       std::span<const event_id> /*after*/) noexcept {
    return errc::not_supported;
  }
  /// The same moves in two steps, for a caller that overlaps the copies with its own work:
  /// *_start checks the range, enqueues the copies and answers at once; the move of the range at
  /// `addr` is then in flight until finish_move(addr), which waits for the copies and completes it.
  /// In flight, an offload's device pages still hold the bytes (they are released at the finish,
  /// when the host memory takes their place; a failed finish leaves them, contents intact), and a
  /// restore's device pages are mapped but filled only when its copies are done: work that reads
  /// them is ordered after the copies with order_after_move. A device that cannot split a move
  /// does it whole in *_start and has nothing in flight (the defaults).
  virtual errc offload_start(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                             std::span<const event_id> after) noexcept {
    return offload(addr, bytes, live, after);
  }
  virtual errc restore_start(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                             std::span<const event_id> after) noexcept {
    return restore(addr, bytes, live, after);
  }
  /// Whether the copies of the move in flight at `addr` are done (true when none is in flight).
  virtual result<bool> move_done(device_address /*addr*/) noexcept { return true; }
  /// Waits for the copies of the move in flight at `addr` and completes it (ok when none is). An
  /// offload's mapping changes under the streams that may have used the range since its start:
  /// `after` marks their work, waited for first.
  virtual errc finish_move(device_address /*addr*/, std::span<const event_id> /*after*/) noexcept { return errc::ok; }
  /// Makes `stream` wait (on the device, not the host) for the copies of the move at `addr`.
  virtual errc order_after_move(device_address /*addr*/, stream_id /*stream*/) noexcept { return errc::ok; }
  /// Bytes of host memory behind offloaded ranges now.
  virtual std::size_t host_backed_bytes() const noexcept { return 0; }
  /// Bytes the offload and restore copies have moved so far, each direction.
  struct moved_bytes {
    std::size_t to_host = 0;
    std::size_t to_device = 0;
  };
  virtual moved_bytes moved() const noexcept { return {}; }

  // --- streams and events --------------------------------------------------------------------
  virtual result<event_id> create_event() noexcept = 0;
  virtual errc record_event(event_id event, stream_id stream) noexcept = 0;
  /// true when every operation enqueued on the stream before the record has completed.
  virtual result<bool> query_event(event_id event) noexcept = 0;
  virtual errc synchronize_event(event_id event) noexcept = 0;
  virtual void destroy_event(event_id event) noexcept = 0;
  /// Waits for all work on the device (before memory that streams may still touch is unmapped).
  virtual errc synchronize() noexcept = 0;

  /// The last failed call and the driver's words for it ("cuMemCreate(2097152) failed:
  /// CUDA_ERROR_OUT_OF_MEMORY"), for error reports; empty when nothing failed or not known.
  virtual std::string last_failure() const { return {}; }
};

}  // namespace phasealloc
