// cuda_vmm_device's private state and driver helpers, shared by its files (cuda_vmm_device.cpp:
// creation, address space, events; cuda_vmm_offload.cpp: same-address offload).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cuda_driver_api.hpp"
#include "phasealloc/devices/cuda_vmm_device.hpp"

namespace phasealloc {

namespace detail::vmm {

inline errc to_errc(CUresult r) noexcept {
  switch (r) {
    case CUDA_SUCCESS: return errc::ok;
    case CUDA_ERROR_OUT_OF_MEMORY: return errc::out_of_memory;
    case CUDA_ERROR_NOT_SUPPORTED: return errc::not_supported;
    default: return errc::device_refused;
  }
}

inline std::string error_name(const cuda_driver_api& api, CUresult r) {
  const char* name = nullptr;
  if (api.get_error_name != nullptr && api.get_error_name(r, &name) == CUDA_SUCCESS && name != nullptr) return name;
  return fmt::format("CUresult {}", static_cast<int>(r));
}

/// True for the cuInit answers that mean "no usable GPU here" rather than "a GPU misbehaved".
inline bool means_no_gpu(CUresult r) noexcept {
  return r == CUDA_ERROR_NO_DEVICE || r == CUDA_ERROR_STUB_LIBRARY || r == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ||
         r == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE || r == CUDA_ERROR_NOT_INITIALIZED;
}

inline CUdeviceptr to_ptr(device_address addr) noexcept { return static_cast<CUdeviceptr>(addr); }

/// Makes `ctx` current for a scope when it is not already (cuCtxPushCurrent / cuCtxPopCurrent).
class scoped_context {
 public:
  scoped_context(const cuda_driver_api& api, CUcontext ctx) noexcept : api_(api) {
    CUcontext current = nullptr;
    if (api.ctx_get_current(&current) == CUDA_SUCCESS && current == ctx) return;
    pushed_ = api.ctx_push_current(ctx) == CUDA_SUCCESS;
  }
  ~scoped_context() {
    if (!pushed_) return;
    CUcontext popped = nullptr;
    (void)api_.ctx_pop_current(&popped);
  }
  scoped_context(const scoped_context&) = delete;
  scoped_context& operator=(const scoped_context&) = delete;

 private:
  const cuda_driver_api& api_;
  bool pushed_ = false;
};

}  // namespace detail::vmm

struct cuda_vmm_device::state {
  /// A page of a reservation. A mapped device page belongs to one mapping of one physical handle:
  /// map() makes a handle per page, restore() one per chunk of up to restore_chunk_bytes (fewer
  /// driver calls per GiB). A mapping is unmapped whole or not at all (the driver's rule), so every
  /// page of a chunk names the chunk's handle, its size and its place in it.
  struct page {
    CUmemGenericAllocationHandle handle = 0;  ///< 0 for a host-backed page (its run holds the handle)
    bool mapped = false;
    bool host = false;  ///< offloaded (cuda_vmm_offload.cpp): host-backed, or unmapped under host_unmapped
    std::uint32_t unit_pages = 1;  ///< pages of the mapping this page is in
    std::uint32_t unit_index = 0;  ///< this page's place in it (0: the mapping starts here)
  };
  /// Host memory behind an offloaded range: a host-located handle (mapped over the range at its own
  /// addresses), or, on a driver that cannot map host memory at device addresses (host_unmapped),
  /// a page-locked buffer (cuMemHostAlloc) the range's bytes wait in while the range is unmapped.
  struct host_memory {
    CUmemGenericAllocationHandle handle = 0;
    void* pinned = nullptr;
    std::size_t bytes = 0;  ///< the handle's or buffer's (a kept one may be larger than a range)
  };
  /// An offloaded range and the host memory behind it.
  struct host_run {
    host_memory memory;
    std::size_t bytes = 0;  ///< the range
  };
  /// A move whose copies are in flight (offload_start / restore_start until finish_move).
  struct move {
    bool restore = false;
    std::size_t bytes = 0;
    CUevent done = nullptr;      ///< recorded on the copy stream after the copies
    device_address staging = 0;  ///< where the copies reach the host memory: its mapping, or the buffer
    host_memory host;            ///< an offload's (a restore's is its host_run's)
    std::size_t live_bytes = 0;  ///< what the copies move
  };
  struct reservation {
    std::size_t size_bytes = 0;
    std::vector<page> pages;
    std::size_t mapped_pages = 0;  ///< device and host-backed pages alike
  };

  detail::cuda_driver_api api;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  std::size_t page_bytes = 0;
  CUmemAllocationProp prop{};
  std::vector<CUmemAccessDesc> access;  ///< This device first, then each peer granted access.

  CUmemAllocationProp host_prop{};  ///< A host-located handle's (offload), when caps say has_host_backing.
  /// caps().offload_unmaps: offloaded ranges wait unmapped, their bytes in page-locked buffers.
  bool host_unmapped = false;

  std::mutex mutex;  ///< Guards the books below; held across the driver calls that change them.
  std::map<device_address, reservation> reservations;
  std::size_t mapped_bytes = 0;  ///< device memory only
  std::map<device_address, host_run> host_runs;
  std::size_t host_bytes = 0;            ///< the offloaded ranges' bytes
  std::vector<host_memory> idle_hosts;   ///< kept for reuse, oldest first
  std::size_t idle_host_bytes = 0;
  std::size_t host_cache_bytes = 0;      ///< options.host_cache_bytes
  std::size_t restore_chunk_pages = 1;   ///< options.restore_chunk_bytes in pages
  std::size_t run_handle_bytes = 0;      ///< the host memory behind host_runs
  device::moved_bytes moved;
  CUstream copy_stream = nullptr;  ///< made at the first offload
  std::map<device_address, move> moves;  ///< in flight, by range start
  std::vector<CUevent> spare_move_events;
  std::unordered_map<event_id, CUevent> events;
  event_id next_event = 1;

  mutable std::mutex failure_mutex;  ///< Guards last_failure only.
  std::string last_failure;

  errc failed(CUresult r, std::string_view call) {
    std::string text = fmt::format("{} failed: {}", call, detail::vmm::error_name(api, r));
    std::lock_guard lock(failure_mutex);
    last_failure = std::move(text);
    return detail::vmm::to_errc(r);
  }

  /// The reservation holding [addr, addr+bytes) wholly, or nullptr; `first` is the page of addr.
  reservation* find_range(device_address addr, std::size_t bytes, std::size_t& first) {
    if (bytes == 0 || addr + bytes < addr) return nullptr;
    auto it = reservations.upper_bound(addr);
    if (it == reservations.begin()) return nullptr;
    --it;
    if (addr + bytes > it->first + it->second.size_bytes) return nullptr;
    first = (addr - it->first) / page_bytes;
    return &it->second;
  }

  /// The reservation holding page-aligned [addr, addr+bytes) whose pages are all `mapped` to device
  /// memory (or all unmapped when false), with the index of its first page; nullptr when the range breaks the
  /// contract (map of a mapped page, unmap of an unmapped one, outside any reservation).
  reservation* find_pages(device_address addr, std::size_t bytes, bool mapped, std::size_t& first) {
    if (bytes == 0 || addr % page_bytes != 0 || bytes % page_bytes != 0) return nullptr;
    reservation* res = find_range(addr, bytes, first);
    if (res == nullptr) return nullptr;
    for (std::size_t i = first; i < first + bytes / page_bytes; ++i) {
      if (res->pages[i].mapped != mapped || res->pages[i].host) return nullptr;
    }
    return res;
  }

  /// Whether pages [first, first+count) of `res` are whole mappings (no mapping starts before
  /// first or ends after first+count).
  static bool whole_units(const reservation& res, std::size_t first, std::size_t count) {
    if (count == 0) return true;
    const page& head = res.pages[first];
    const page& tail = res.pages[first + count - 1];
    return head.unit_index == 0 && tail.unit_index + 1 == tail.unit_pages;
  }

  /// Unmaps and releases the mapping at page `i` of the reservation at `base`, ignoring errors
  /// (rollback and teardown only); answers its pages.
  std::size_t drop_unit(reservation& res, device_address base, std::size_t i) {
    const std::size_t n = res.pages[i].unit_pages;
    (void)api.mem_unmap(detail::vmm::to_ptr(base + i * page_bytes), n * page_bytes);
    (void)api.mem_release(res.pages[i].handle);
    for (std::size_t k = i; k < i + n; ++k) res.pages[k] = page{};
    return n;
  }

  /// Books pages [first, first+n) as one mapping of `handle` to device memory.
  static void set_unit(reservation& res, std::size_t first, std::size_t n, CUmemGenericAllocationHandle handle) {
    for (std::size_t k = 0; k < n; ++k) {
      res.pages[first + k] = page{.handle = handle,
                                  .mapped = true,
                                  .unit_pages = static_cast<std::uint32_t>(n),
                                  .unit_index = static_cast<std::uint32_t>(k)};
    }
  }

  /// Unmaps the mappings of pages [first, first+count) (whole mappings: whole_units), then
  /// releases their handles, all or nothing: a failed unmap maps back what this call unmapped (a
  /// mapping it cannot put back it books unmapped, mapped_bytes and mapped_pages included). On
  /// success books the pages unmapped; mapped_bytes and mapped_pages are then the caller's to lower.
  errc unmap_units(reservation& res, device_address base, std::size_t first, std::size_t count);

  /// unmap() of an offloaded range (host_runs holds addr): the whole run only, its host memory
  /// kept for reuse or released. Under `mutex`.
  errc unmap_host_run(device_address addr, std::size_t bytes);
  /// Host memory of at least `bytes`: the smallest kept piece that holds them, else a new one (a
  /// host-located cuMemCreate, or cuMemHostAlloc when host_unmapped). Under `mutex`, in the
  /// device's context.
  CUresult take_host(std::size_t bytes, host_memory& out);
  /// Keeps host memory no range uses any more for reuse, releasing the oldest beyond host_cache_bytes.
  void keep_host(const host_memory& memory);
  /// Gives host memory back to the driver (ignoring failures beyond noting them).
  void release_host(const host_memory& memory);

  /// Whether [addr, addr+bytes) overlaps a move in flight.
  bool moving(device_address addr, std::size_t bytes) const {
    auto it = moves.lower_bound(addr + bytes);
    if (it == moves.begin()) return false;
    --it;
    return it->first + it->second.bytes > addr;
  }

  CUevent find_event(event_id id) {
    std::lock_guard lock(mutex);
    const auto it = events.find(id);
    return it == events.end() ? nullptr : it->second;
  }
};


}  // namespace phasealloc
