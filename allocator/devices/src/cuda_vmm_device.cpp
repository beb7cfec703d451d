// cuda_vmm_device: the CUDA VMM API behind device.hpp.
//
// Note [VMM device]
// ~~~~~~~~~~~~~~~~~
// Rationale
//   A cudaMalloc segment can only be freed whole, so one live block pins all of it: that is the
//   fragmentation an RLHF job pays when generation's KV cache and training's activations take
//   turns on the same GPU. With VMM, address space and memory are separate: the engine reserves a
//   range once and maps or unmaps pages as blocks come and go, so memory goes back to the driver
//   page by page at a phase transition without moving a live block. This is the mechanism of
//   PyTorch's expandable_segments, offered as device.hpp primitives so that policies decide when.
//
// Approach
//   - One physical handle per page (cuMemCreate(page_bytes)), mapped at its page's address.
//     cuMemUnmap must name whole mappings, so one handle per map() call would forbid unmapping a
//     subrange of it later; one handle per page lets unmap() name any page-aligned subrange, at
//     the cost of one cuMemCreate + cuMemMap per page (PyTorch's ExpandableSegment does the same).
//     cuda_vmm_options::page_bytes trades that cost against unmap precision.
//   - One cuMemSetAccess per map() call over the whole newly mapped range (legal: it is fully
//     mapped). Access is read/write for this device and for every peer granted access
//     (grant_peer_access: one more descriptor, applied at once to every mapped run of pages).
//   - Books: base -> reservation, each with one {handle, mapped} slot per page. Every precondition
//     of device.hpp is checked against the books before any driver call, so a caller's mistake
//     answers invalid_argument and never reaches the driver.
//   - All or nothing. map() unmaps and releases the pages it mapped when a later page, or the
//     access call, fails. unmap() unmaps every page before releasing any handle: if an unmap
//     fails, the pages it already unmapped are mapped back with the same handles (contents kept).
//   - The device's primary context is retained at creation and pushed around each call when it
//     is not already current. The CUDA runtime uses the same primary context, so our mappings and
//     PyTorch's kernels live in one context.
//   - Driver entry points come from cudaGetDriverEntryPointByVersion, each at the ABI version we
//     compiled against (cuda_driver_api.hpp). libcuda is never linked, so the library loads on a
//     machine without a driver, where create() answers not_supported. The table is also the test
//     seam: create_with_driver() runs this file against a fake driver (cuda_vmm_fake_driver_test).
//
// Limitations
//   - Peers reach our pages only once granted (cudaDeviceEnablePeerAccess does not cover VMM
//     mappings); the c10 bridge grants when PyTorch enables peer access.
//   - No IPC: handles are created with CU_MEM_HANDLE_TYPE_NONE, so these pages cannot be exported
//     to another process (PyTorch asks for POSIX fds when expandable segments meet IPC).
//   - unmap() does not synchronize (cuMemUnmap, unlike cudaFree, does not wait for streams); the
//     engine calls synchronize() first when streams may still touch the pages.
//   - Mapping N pages costs about 2N driver calls: 20 GiB at 2 MiB pages is ~20k calls.
//   - If unmap() fails and mapping a page back fails too, that page stays unmapped in the books
//     (which still match the driver) although unmap() answered an error; a later unmap() of the
//     range then answers invalid_argument for it. A cuMemRelease failure after a good unmap leaks
//     that handle; it is noted in last_failure() and unmap() answers ok (the range is unmapped).
#include "phasealloc/devices/cuda_vmm_device.hpp"

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_driver_api.hpp"
#include "cuda_runtime_util.hpp"
#include "cuda_vmm_state.hpp"

namespace phasealloc {

namespace detail {

errc resolve_cuda_driver_api(cuda_driver_api& api, std::string& why) noexcept {
  struct entry {
    const char* symbol;
    unsigned version;  ///< The ABI variant the member's PFN type names.
    void** slot;
  };
  const entry entries[] = {
      {"cuInit", 2000, reinterpret_cast<void**>(&api.init)},
      {"cuGetErrorName", 6000, reinterpret_cast<void**>(&api.get_error_name)},
      {"cuDeviceGet", 2000, reinterpret_cast<void**>(&api.device_get)},
      {"cuDeviceGetAttribute", 2000, reinterpret_cast<void**>(&api.device_get_attribute)},
      {"cuDeviceTotalMem", 3020, reinterpret_cast<void**>(&api.device_total_mem)},
      {"cuDevicePrimaryCtxRetain", 7000, reinterpret_cast<void**>(&api.primary_ctx_retain)},
      {"cuDevicePrimaryCtxRelease", 11000, reinterpret_cast<void**>(&api.primary_ctx_release)},
      {"cuCtxGetCurrent", 4000, reinterpret_cast<void**>(&api.ctx_get_current)},
      {"cuCtxPushCurrent", 4000, reinterpret_cast<void**>(&api.ctx_push_current)},
      {"cuCtxPopCurrent", 4000, reinterpret_cast<void**>(&api.ctx_pop_current)},
      {"cuCtxSynchronize", 2000, reinterpret_cast<void**>(&api.ctx_synchronize)},
      {"cuMemGetInfo", 3020, reinterpret_cast<void**>(&api.mem_get_info)},
      {"cuMemGetAllocationGranularity", 10020, reinterpret_cast<void**>(&api.mem_get_allocation_granularity)},
      {"cuMemAddressReserve", 10020, reinterpret_cast<void**>(&api.mem_address_reserve)},
      {"cuMemAddressFree", 10020, reinterpret_cast<void**>(&api.mem_address_free)},
      {"cuMemCreate", 10020, reinterpret_cast<void**>(&api.mem_create)},
      {"cuMemRelease", 10020, reinterpret_cast<void**>(&api.mem_release)},
      {"cuMemMap", 10020, reinterpret_cast<void**>(&api.mem_map)},
      {"cuMemUnmap", 10020, reinterpret_cast<void**>(&api.mem_unmap)},
      {"cuMemSetAccess", 10020, reinterpret_cast<void**>(&api.mem_set_access)},
      {"cuEventCreate", 2000, reinterpret_cast<void**>(&api.event_create)},
      {"cuEventRecord", 2000, reinterpret_cast<void**>(&api.event_record)},
      {"cuEventQuery", 2000, reinterpret_cast<void**>(&api.event_query)},
      {"cuEventSynchronize", 2000, reinterpret_cast<void**>(&api.event_synchronize)},
      {"cuEventDestroy", 4000, reinterpret_cast<void**>(&api.event_destroy)},
  };
  const entry optional_entries[] = {  // offload's: a driver without them still serves the rest
      {"cuStreamCreate", 2000, reinterpret_cast<void**>(&api.stream_create)},
      {"cuStreamDestroy", 4000, reinterpret_cast<void**>(&api.stream_destroy)},
      {"cuStreamWaitEvent", 3020, reinterpret_cast<void**>(&api.stream_wait_event)},
      {"cuStreamSynchronize", 2000, reinterpret_cast<void**>(&api.stream_synchronize)},
      {"cuMemcpyAsync", 4000, reinterpret_cast<void**>(&api.memcpy_async)},
      {"cuMemHostAlloc", 2020, reinterpret_cast<void**>(&api.mem_host_alloc)},
      {"cuMemFreeHost", 2000, reinterpret_cast<void**>(&api.mem_free_host)},
  };
  for (const entry& e : optional_entries) {
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    const cudaError_t r = cudaGetDriverEntryPointByVersion(e.symbol, e.slot, e.version, cudaEnableDefault, &status);
#else
    const cudaError_t r = cudaGetDriverEntryPoint(e.symbol, e.slot, cudaEnableDefault, &status);
#endif
    if (r != cudaSuccess) (void)cudaGetLastError();
    if (r != cudaSuccess || status != cudaDriverEntryPointSuccess) *e.slot = nullptr;
  }
  for (const entry& e : entries) {
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    constexpr const char* resolver = "cudaGetDriverEntryPointByVersion";
    const cudaError_t r = cudaGetDriverEntryPointByVersion(e.symbol, e.slot, e.version, cudaEnableDefault, &status);
#else  // before 12.5: the variant the runtime was built for, which is ours for every symbol above
    constexpr const char* resolver = "cudaGetDriverEntryPoint";
    const cudaError_t r = cudaGetDriverEntryPoint(e.symbol, e.slot, cudaEnableDefault, &status);
#endif
    if (r != cudaSuccess) {
      (void)cudaGetLastError();
      why = fmt::format("no CUDA driver: {}({}) returned {}", resolver, e.symbol, describe_cuda_error(r));
      return errc::not_supported;
    }
    if (status != cudaDriverEntryPointSuccess || *e.slot == nullptr) {
      why = fmt::format("the CUDA driver lacks {} (v{}): {}", e.symbol, e.version,
                        status == cudaDriverEntryPointVersionNotSufficent ? "driver too old" : "symbol not found");
      return errc::not_supported;
    }
  }
  return errc::ok;
}

const char* missing_cuda_driver_entry(const cuda_driver_api& api) noexcept {
#define PHASEALLOC_REQUIRE_ENTRY(member) \
  if (api.member == nullptr) return #member
  PHASEALLOC_REQUIRE_ENTRY(init);
  PHASEALLOC_REQUIRE_ENTRY(get_error_name);
  PHASEALLOC_REQUIRE_ENTRY(device_get);
  PHASEALLOC_REQUIRE_ENTRY(device_get_attribute);
  PHASEALLOC_REQUIRE_ENTRY(device_total_mem);
  PHASEALLOC_REQUIRE_ENTRY(primary_ctx_retain);
  PHASEALLOC_REQUIRE_ENTRY(primary_ctx_release);
  PHASEALLOC_REQUIRE_ENTRY(ctx_get_current);
  PHASEALLOC_REQUIRE_ENTRY(ctx_push_current);
  PHASEALLOC_REQUIRE_ENTRY(ctx_pop_current);
  PHASEALLOC_REQUIRE_ENTRY(ctx_synchronize);
  PHASEALLOC_REQUIRE_ENTRY(mem_get_info);
  PHASEALLOC_REQUIRE_ENTRY(mem_get_allocation_granularity);
  PHASEALLOC_REQUIRE_ENTRY(mem_address_reserve);
  PHASEALLOC_REQUIRE_ENTRY(mem_address_free);
  PHASEALLOC_REQUIRE_ENTRY(mem_create);
  PHASEALLOC_REQUIRE_ENTRY(mem_release);
  PHASEALLOC_REQUIRE_ENTRY(mem_map);
  PHASEALLOC_REQUIRE_ENTRY(mem_unmap);
  PHASEALLOC_REQUIRE_ENTRY(mem_set_access);
  PHASEALLOC_REQUIRE_ENTRY(event_create);
  PHASEALLOC_REQUIRE_ENTRY(event_record);
  PHASEALLOC_REQUIRE_ENTRY(event_query);
  PHASEALLOC_REQUIRE_ENTRY(event_synchronize);
  PHASEALLOC_REQUIRE_ENTRY(event_destroy);
#undef PHASEALLOC_REQUIRE_ENTRY
  return nullptr;
}

}  // namespace detail

using detail::cuda_driver_api;
using namespace detail::vmm;

// --- creation -----------------------------------------------------------------------------------

result<std::unique_ptr<cuda_vmm_device>> cuda_vmm_device::create(int ordinal, cuda_vmm_options options,
                                                                 std::string* why) noexcept {
  if (const errc e = detail::probe_cuda_device(ordinal, why); e != errc::ok) return e;
  cuda_driver_api api;
  std::string reason;
  if (const errc e = detail::resolve_cuda_driver_api(api, reason); e != errc::ok) {
    if (why) *why = std::move(reason);
    return e;
  }
  return create_with_driver(api, ordinal, options, why);
}

result<std::unique_ptr<cuda_vmm_device>> cuda_vmm_device::create_with_driver(const cuda_driver_api& api, int ordinal,
                                                                             cuda_vmm_options options,
                                                                             std::string* why) noexcept {
  const auto refuse = [&](errc code, std::string text) -> errc {
    if (why) *why = std::move(text);
    return code;
  };
  if (const char* missing = detail::missing_cuda_driver_entry(api)) {
    return refuse(errc::not_supported, fmt::format("the CUDA driver table lacks {}", missing));
  }
  CUresult r = api.init(0);
  if (r != CUDA_SUCCESS) {
    return refuse(means_no_gpu(r) ? errc::not_supported : errc::device_refused,
                  fmt::format("no usable CUDA driver: cuInit returned {}", error_name(api, r)));
  }
  CUdevice dev = 0;
  r = api.device_get(&dev, ordinal);
  if (r != CUDA_SUCCESS) {
    return refuse(r == CUDA_ERROR_INVALID_DEVICE ? errc::invalid_argument : errc::device_refused,
                  fmt::format("CUDA device {}: cuDeviceGet returned {}", ordinal, error_name(api, r)));
  }
  int vmm = 0;
  r = api.device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
  if (r != CUDA_SUCCESS) {
    return refuse(errc::device_refused, fmt::format("CUDA device {}: cuDeviceGetAttribute(VMM) returned {}", ordinal,
                                                    error_name(api, r)));
  }
  if (vmm == 0) {
    return refuse(errc::not_supported,
                  fmt::format("CUDA device {} lacks virtual memory management (the driver or GPU is too old)", ordinal));
  }

  auto s = std::make_unique<state>();
  s->api = api;
  s->dev = dev;
  s->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  s->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  s->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  s->prop.location.id = dev;
  s->access.push_back(CUmemAccessDesc{.location = s->prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE});

  std::size_t granularity = 0;
  r = api.mem_get_allocation_granularity(&granularity, &s->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS || granularity == 0) {
    return refuse(errc::device_refused, fmt::format("CUDA device {}: cuMemGetAllocationGranularity returned {}",
                                                    ordinal, error_name(api, r)));
  }
  s->page_bytes = granularity;
  s->host_cache_bytes = options.host_cache_bytes;
  if (options.page_bytes != 0) {
    const std::size_t page = options.page_bytes;
    if (page % granularity != 0 || (page & (page - 1)) != 0) {
      return refuse(errc::invalid_argument,
                    fmt::format("cuda_vmm_options::page_bytes {} is not a power-of-two multiple of the driver's "
                                "granularity {}",
                                page, granularity));
    }
    s->page_bytes = page;
  }
  s->restore_chunk_pages = std::max<std::size_t>(1, options.restore_chunk_bytes / s->page_bytes);
  std::size_t total_bytes = 0;
  r = api.device_total_mem(&total_bytes, dev);
  if (r != CUDA_SUCCESS) {
    return refuse(errc::device_refused,
                  fmt::format("CUDA device {}: cuDeviceTotalMem returned {}", ordinal, error_name(api, r)));
  }
  r = api.primary_ctx_retain(&s->ctx, dev);
  if (r != CUDA_SUCCESS) {
    return refuse(errc::device_refused,
                  fmt::format("CUDA device {}: cuDevicePrimaryCtxRetain returned {}", ordinal, error_name(api, r)));
  }
  const bool host_backing = probe_host_backing(*s);
  s->host_unmapped = !host_backing && detail::has_pinned_entries(s->api);
  const device_caps caps{.granularity_bytes = s->page_bytes,
                         .capacity_bytes = total_bytes,
                         .has_virtual_reserve = true,
                         .has_partial_unmap = true,
                         .has_host_backing = host_backing,
                         .offload_unmaps = s->host_unmapped};
  return std::unique_ptr<cuda_vmm_device>(new cuda_vmm_device(ordinal, caps, std::move(s)));
}

cuda_vmm_device::cuda_vmm_device(int ordinal, device_caps caps, std::unique_ptr<state> s) noexcept
    : ordinal_(ordinal), caps_(caps), state_(std::move(s)) {}

cuda_vmm_device::~cuda_vmm_device() {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  {
    scoped_context ctx(s.api, s.ctx);
    for (const auto& [addr, m] : s.moves) {  // copies still in flight read or write what goes below
      (void)s.api.event_synchronize(m.done);
      if (!s.host_unmapped) {
        (void)s.api.mem_unmap(to_ptr(m.staging), m.bytes);
        (void)s.api.mem_address_free(to_ptr(m.staging), m.bytes);
      }
      if (m.restore) {  // the range holds device pages now: its host memory is no longer mapped there
        s.release_host(s.host_runs.at(addr).memory);
        s.host_runs.erase(addr);
      } else {
        s.release_host(m.host);
      }
      (void)s.api.event_destroy(m.done);
    }
    for (CUevent e : s.spare_move_events) (void)s.api.event_destroy(e);
    for (const auto& [addr, run] : s.host_runs) {
      if (!s.host_unmapped) (void)s.api.mem_unmap(to_ptr(addr), run.bytes);
      s.release_host(run.memory);
    }
    for (const auto& kept : s.idle_hosts) s.release_host(kept);
    if (s.copy_stream != nullptr) (void)s.api.stream_destroy(s.copy_stream);
    for (auto& [base, res] : s.reservations) {
      for (std::size_t i = 0; i < res.pages.size();) {
        i += res.pages[i].mapped && !res.pages[i].host ? s.drop_unit(res, base, i) : 1;
      }
      (void)s.api.mem_address_free(to_ptr(base), res.size_bytes);
    }
    for (const auto& [id, event] : s.events) (void)s.api.event_destroy(event);
  }
  (void)s.api.primary_ctx_release(s.dev);
}

// --- address space and memory -------------------------------------------------------------------

result<device_address> cuda_vmm_device::reserve(std::size_t bytes) noexcept {
  state& s = *state_;
  if (bytes == 0 || bytes % s.page_bytes != 0) return errc::invalid_argument;
  std::lock_guard lock(s.mutex);
  scoped_context ctx(s.api, s.ctx);
  CUdeviceptr ptr = 0;
  const CUresult r = s.api.mem_address_reserve(&ptr, bytes, s.page_bytes, 0, 0);
  if (r != CUDA_SUCCESS) return s.failed(r, fmt::format("cuMemAddressReserve({})", bytes));
  const auto base = static_cast<device_address>(ptr);
  if (base % s.page_bytes != 0) {  // the alignment argument forbids it; refuse rather than lie
    (void)s.api.mem_address_free(ptr, bytes);
    std::lock_guard failure_lock(s.failure_mutex);
    s.last_failure = fmt::format("cuMemAddressReserve({}) returned {:#x}, not aligned to {}", bytes, base, s.page_bytes);
    return errc::device_refused;
  }
  state::reservation res;
  res.size_bytes = bytes;
  res.pages.resize(bytes / s.page_bytes);
  s.reservations.emplace(base, std::move(res));
  return base;
}

errc cuda_vmm_device::release(device_address base, std::size_t bytes) noexcept {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto it = s.reservations.find(base);
  if (it == s.reservations.end() || it->second.size_bytes != bytes || it->second.mapped_pages != 0) {
    return errc::invalid_argument;
  }
  scoped_context ctx(s.api, s.ctx);
  const CUresult r = s.api.mem_address_free(to_ptr(base), bytes);
  if (r != CUDA_SUCCESS) return s.failed(r, fmt::format("cuMemAddressFree({:#x}, {})", base, bytes));
  s.reservations.erase(it);
  return errc::ok;
}

errc cuda_vmm_device::map(device_address addr, std::size_t bytes) noexcept {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  std::size_t first = 0;
  state::reservation* res = s.find_pages(addr, bytes, /*mapped=*/false, first);
  if (res == nullptr) return errc::invalid_argument;
  const std::size_t count = bytes / s.page_bytes;

  scoped_context ctx(s.api, s.ctx);
  errc err = errc::ok;
  std::size_t done = 0;  // pages of this call mapped so far
  for (; done < count; ++done) {
    const device_address at = addr + done * s.page_bytes;
    CUmemGenericAllocationHandle handle = 0;
    CUresult r = s.api.mem_create(&handle, s.page_bytes, &s.prop, 0);
    if (r != CUDA_SUCCESS) {
      err = s.failed(r, fmt::format("cuMemCreate({})", s.page_bytes));
      break;
    }
    r = s.api.mem_map(to_ptr(at), s.page_bytes, 0, handle, 0);
    if (r != CUDA_SUCCESS) {
      (void)s.api.mem_release(handle);
      err = s.failed(r, fmt::format("cuMemMap({:#x}, {})", at, s.page_bytes));
      break;
    }
    state::set_unit(*res, first + done, 1, handle);
  }
  if (err == errc::ok) {
    const CUresult r = s.api.mem_set_access(to_ptr(addr), bytes, s.access.data(), s.access.size());
    if (r != CUDA_SUCCESS) err = s.failed(r, fmt::format("cuMemSetAccess({:#x}, {})", addr, bytes));
  }
  if (err != errc::ok) {
    for (std::size_t i = 0; i < done; ++i) (void)s.drop_unit(*res, addr - first * s.page_bytes, first + i);
    return err;
  }
  res->mapped_pages += count;
  s.mapped_bytes += bytes;
  return errc::ok;
}

errc cuda_vmm_device::grant_peer_access(int peer) noexcept {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  for (const CUmemAccessDesc& d : s.access) {
    if (d.location.id == peer) return errc::ok;  // this device, or a peer granted before
  }
  const CUmemAccessDesc desc{.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = peer},
                             .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  try {
    s.access.reserve(s.access.size() + 1);  // the push_back below cannot fail after the driver calls
  } catch (...) {
    return errc::out_of_memory;
  }
  scoped_context ctx(s.api, s.ctx);
  // Every run of mapped pages, as one call each (a range passed to cuMemSetAccess must be mapped).
  for (const auto& [base, res] : s.reservations) {
    for (std::size_t i = 0; i < res.pages.size();) {
      if (!res.pages[i].mapped) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < res.pages.size() && res.pages[j].mapped) ++j;
      const device_address at = base + i * s.page_bytes;
      const CUresult r = s.api.mem_set_access(to_ptr(at), (j - i) * s.page_bytes, &desc, 1);
      if (r != CUDA_SUCCESS) {
        return s.failed(r, fmt::format("cuMemSetAccess({:#x}, {}, peer {})", at, (j - i) * s.page_bytes, peer));
      }
      i = j;
    }
  }
  s.access.push_back(desc);
  return errc::ok;
}

errc cuda_vmm_device::unmap(device_address addr, std::size_t bytes) noexcept {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.moving(addr, bytes)) return errc::invalid_argument;  // finish_move first
  if (s.host_runs.contains(addr)) return s.unmap_host_run(addr, bytes);
  std::size_t first = 0;
  state::reservation* res = s.find_pages(addr, bytes, /*mapped=*/true, first);
  const std::size_t count = bytes / s.page_bytes;
  if (res == nullptr || !state::whole_units(*res, first, count)) return errc::invalid_argument;
  scoped_context ctx(s.api, s.ctx);
  if (const errc e = s.unmap_units(*res, addr - first * s.page_bytes, first, count); e != errc::ok) return e;
  res->mapped_pages -= count;
  s.mapped_bytes -= bytes;
  return errc::ok;
}

errc cuda_vmm_device::state::unmap_units(reservation& res, device_address base, std::size_t first,
                                         std::size_t count) {
  // Unmap every mapping before releasing any handle, so a failure can be undone with the same handles.
  const std::size_t end = first + count;
  std::size_t i = first;
  for (; i < end; i += res.pages[i].unit_pages) {
    const device_address at = base + i * page_bytes;
    const std::size_t bytes = res.pages[i].unit_pages * page_bytes;
    const CUresult r = api.mem_unmap(to_ptr(at), bytes);
    if (r == CUDA_SUCCESS) continue;
    const errc err = failed(r, fmt::format("cuMemUnmap({:#x}, {})", at, bytes));
    for (std::size_t j = first; j < i;) {
      const page& p = res.pages[j];
      const device_address back = base + j * page_bytes;
      const std::size_t n = p.unit_pages;
      if (api.mem_map(to_ptr(back), n * page_bytes, 0, p.handle, 0) != CUDA_SUCCESS ||
          api.mem_set_access(to_ptr(back), n * page_bytes, access.data(), access.size()) != CUDA_SUCCESS) {
        // Could not map it back: the books say unmapped, as the driver does.
        (void)api.mem_release(p.handle);
        for (std::size_t k = j; k < j + n; ++k) res.pages[k] = page{};
        res.mapped_pages -= n;
        mapped_bytes -= n * page_bytes;
      }
      j += n;
    }
    return err;
  }
  for (i = first; i < end;) {
    const std::size_t n = res.pages[i].unit_pages;
    const CUresult r = api.mem_release(res.pages[i].handle);
    if (r != CUDA_SUCCESS) (void)failed(r, "cuMemRelease (handle leaked)");
    for (std::size_t k = i; k < i + n; ++k) res.pages[k] = page{};
    i += n;
  }
  return errc::ok;
}

byte_range cuda_vmm_device::unmap_span(device_address lo, device_address hi) const noexcept {
  if (hi <= lo) return {lo, 0};
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  std::size_t first = 0;
  const state::reservation* res = s.find_range(lo, hi - lo, first);
  if (res == nullptr || lo % s.page_bytes != 0 || hi % s.page_bytes != 0) return {lo, hi - lo};  // unmap() answers
  const device_address base = lo - first * s.page_bytes;
  std::size_t end = first + (hi - lo) / s.page_bytes;
  const state::page& head = res->pages[first];
  if (head.mapped && !head.host && head.unit_index != 0) first += head.unit_pages - head.unit_index;
  if (first < end) {
    const state::page& tail = res->pages[end - 1];
    if (tail.mapped && !tail.host && tail.unit_index + 1 != tail.unit_pages) end -= tail.unit_index + 1;
  }
  if (first >= end) return {lo, 0};
  return {base + first * s.page_bytes, (end - first) * s.page_bytes};
}

errc cuda_vmm_device::state::unmap_host_run(device_address addr, std::size_t bytes) {
  const auto run = host_runs.find(addr);
  std::size_t first = 0;
  reservation* res = find_range(addr, bytes, first);
  if (res == nullptr || run->second.bytes != bytes) return errc::invalid_argument;  // whole runs only
  scoped_context scope(api, ctx);
  if (!host_unmapped) {  // an unmapping offload left nothing mapped there
    const CUresult r = api.mem_unmap(to_ptr(addr), bytes);
    if (r != CUDA_SUCCESS) return failed(r, fmt::format("cuMemUnmap({:#x}, {}) of a host-backed range", addr, bytes));
  }
  keep_host(run->second.memory);
  run_handle_bytes -= run->second.memory.bytes;
  const std::size_t count = bytes / page_bytes;
  for (std::size_t i = first; i < first + count; ++i) res->pages[i] = page{};
  res->mapped_pages -= count;
  host_bytes -= bytes;
  host_runs.erase(run);
  return errc::ok;
}

std::size_t cuda_vmm_device::free_bytes() const noexcept {
  state& s = *state_;
  scoped_context ctx(s.api, s.ctx);
  std::size_t free = 0;
  std::size_t total = 0;
  return s.api.mem_get_info(&free, &total) == CUDA_SUCCESS ? free : 0;
}

std::size_t cuda_vmm_device::mapped_bytes() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->mapped_bytes;
}

std::size_t cuda_vmm_device::live_reservations() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->reservations.size();
}

std::string cuda_vmm_device::last_failure() const {
  std::lock_guard lock(state_->failure_mutex);
  return state_->last_failure;
}

// --- streams and events -------------------------------------------------------------------------
// Event calls run outside the books' lock: a wait must not block another engine on this device.

result<event_id> cuda_vmm_device::create_event() noexcept {
  state& s = *state_;
  scoped_context ctx(s.api, s.ctx);
  CUevent event = nullptr;
  const CUresult r = s.api.event_create(&event, CU_EVENT_DISABLE_TIMING);
  if (r != CUDA_SUCCESS) return s.failed(r, "cuEventCreate(CU_EVENT_DISABLE_TIMING)");
  std::lock_guard lock(s.mutex);
  const event_id id = s.next_event++;
  s.events.emplace(id, event);
  return id;
}

errc cuda_vmm_device::record_event(event_id event, stream_id stream) noexcept {
  state& s = *state_;
  CUevent ev = s.find_event(event);
  if (ev == nullptr) return errc::invalid_argument;
  scoped_context ctx(s.api, s.ctx);
  const CUresult r = s.api.event_record(ev, reinterpret_cast<CUstream>(stream));
  if (r != CUDA_SUCCESS) return s.failed(r, fmt::format("cuEventRecord(stream {:#x})", stream));
  return errc::ok;
}

result<bool> cuda_vmm_device::query_event(event_id event) noexcept {
  state& s = *state_;
  CUevent ev = s.find_event(event);
  if (ev == nullptr) return errc::invalid_argument;
  scoped_context ctx(s.api, s.ctx);
  const CUresult r = s.api.event_query(ev);
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  return s.failed(r, "cuEventQuery");
}

errc cuda_vmm_device::synchronize_event(event_id event) noexcept {
  state& s = *state_;
  CUevent ev = s.find_event(event);
  if (ev == nullptr) return errc::invalid_argument;
  scoped_context ctx(s.api, s.ctx);
  const CUresult r = s.api.event_synchronize(ev);
  if (r != CUDA_SUCCESS) return s.failed(r, "cuEventSynchronize");
  return errc::ok;
}

void cuda_vmm_device::destroy_event(event_id event) noexcept {
  state& s = *state_;
  CUevent ev = nullptr;
  {
    std::lock_guard lock(s.mutex);
    const auto it = s.events.find(event);
    if (it == s.events.end()) return;
    ev = it->second;
    s.events.erase(it);
  }
  scoped_context ctx(s.api, s.ctx);
  const CUresult r = s.api.event_destroy(ev);
  if (r != CUDA_SUCCESS) (void)s.failed(r, "cuEventDestroy");
}

errc cuda_vmm_device::synchronize() noexcept {
  state& s = *state_;
  scoped_context ctx(s.api, s.ctx);
  const CUresult r = s.api.ctx_synchronize();
  if (r != CUDA_SUCCESS) return s.failed(r, "cuCtxSynchronize");
  return errc::ok;
}

}  // namespace phasealloc
