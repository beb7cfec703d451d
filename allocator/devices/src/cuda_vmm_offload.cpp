// cuda_vmm_device's same-address offload: a range's bytes move to host memory that stays mapped at
// the same device addresses, and come back to device pages there.
//
// Note [same-address offload]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Rationale
//   Moving idle memory off the GPU by hand (model.cpu(), torch_memory_saver's unmap) either changes
//   addresses, so captured graphs and registered buffers go stale, or leaves them unmapped, so a
//   stray access kills the context. CUDA 12.2+ can back device virtual addresses with host memory
//   (cuMemCreate at a host location): mapped over the range in place of its device pages, the
//   addresses keep working, at link speed instead of HBM speed.
// Approach
//   - offload: one host-located handle for the whole range (a kept one when one holds it), mapped
//     at a staging reservation; the live ranges (adjacent ones coalesced) are copied there with
//     cuMemcpyAsync on the device's copy stream, which first waits for the `after` events; once
//     the copies are done (the move's event), the range's device pages are unmapped (handles
//     kept), the host handle is mapped over the range and given the range's access, and only then
//     are the device handles released: a failure before that point maps the device pages back,
//     contents intact.
//   - restore: device pages are made and mapped at the range only after the host handle is mapped
//     at a staging reservation; the copy stream waits for `after`, the host mapping at the range is
//     removed, device pages are mapped there, the live bytes are copied back from the staging
//     mapping, and the host handle is released. Out of device memory at any step leaves the host
//     handle mapped at the range (still correct, only slow) and answers out_of_memory.
//   - A driver that cannot map host memory at device addresses (before CUDA 12.2: probe_host_backing
//     finds no host-located handle) gets the same moves with the range unmapped in between
//     (caps().offload_unmaps, state::host_unmapped): the copies go to and from a page-locked
//     buffer (cuMemHostAlloc, reused like the handles), the offload's finish unmaps the device pages
//     and maps nothing over them, the restore maps device pages there again. A kernel that touches
//     the range meanwhile faults, as after torch_memory_saver's pause; the caller is told once
//     (the C ABI's phasealloc_offload_kind).
//   - Two steps: offload_start / restore_start do everything up to the copies, enqueue them and
//     record an event after them on the copy stream (the move is then in `moves`, and no other
//     call may touch its range); finish_move waits for the event and does the rest (an offload's
//     swap of mappings, a restore's release of its staging). offload and restore are the two steps
//     back to back. order_after_move makes a caller's stream wait for the event.
//   - Books: a host-backed page is mapped but `host`; the run's handle is in host_runs. mapped_bytes
//     counts device memory only (a restore's pages from its start); host_bytes the host memory
//     behind runs (a restore's until its finish); moved the copies' bytes, at the finish.
// Limitations
//   - A restore makes one device handle per chunk of up to restore_chunk_bytes (64 MiB: about 32
//     driver calls per GiB, where a handle per page took 1,024), mapped whole. The driver unmaps a
//     mapping whole or not at all, so such a range is released in chunks afterwards: unmap_span
//     trims a release to the chunks it covers, and the engine releases only that (the rest of a
//     chunk stays reserved, counted, until the whole chunk is free). An offload of memory that
//     map() made still unmaps and releases it a page at a time (2 calls per page).
//   - finish_move waits on the host with the device's mutex held: another thread's map or unmap
//     on this device waits for those copies too.
//   - The addresses are unmapped for the instant between removing one mapping and adding the
//     other: work on another stream that touches the range then (it should not: `after` names the
//     streams that used it) faults, as it would on any remap.
//   - Host memory comes back to the driver only beyond cuda_vmm_options::host_cache_bytes: a
//     restored range's host handle is kept for the next offload (the smallest kept handle that
//     holds a range serves it), so a cycle after the first pins nothing. Kept handles count in
//     host_held_bytes(), not in host_backed_bytes().
#include <algorithm>
#include <vector>

#include "cuda_vmm_state.hpp"
#include "phasealloc/check.hpp"

namespace phasealloc {

using namespace detail::vmm;

namespace {

/// `live` with adjacent ranges merged: one copy each.
std::vector<byte_range> coalesced(std::span<const byte_range> live) {
  std::vector<byte_range> out;
  for (const byte_range& r : live) {
    if (!out.empty() && out.back().addr + out.back().bytes == r.addr) {
      out.back().bytes += r.bytes;
    } else {
      out.push_back(r);
    }
  }
  return out;
}


}  // namespace

bool cuda_vmm_device::probe_host_backing(state& s) noexcept {
  if (!detail::has_offload_entries(s.api)) return false;
  int host_vmm = 0;
  int numa_vmm = 0;
  (void)s.api.device_get_attribute(&host_vmm, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, s.dev);
  (void)s.api.device_get_attribute(&numa_vmm, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, s.dev);
  if (host_vmm == 0 && numa_vmm == 0) return false;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  if (host_vmm != 0) {
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  } else {
    int node = -1;
    (void)s.api.device_get_attribute(&node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, s.dev);
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = node < 0 ? 0 : node;
  }
  std::size_t granularity = 0;
  if (s.api.mem_get_allocation_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
      granularity == 0 || s.page_bytes % granularity != 0) {
    return false;
  }
  s.host_prop = prop;
  return true;
}

namespace {

/// The device's copy stream, made on first use; nullptr (with the failure noted) when it cannot be.
CUstream copy_stream(cuda_vmm_device::state& s) {
  if (s.copy_stream == nullptr) {
    const CUresult r = s.api.stream_create(&s.copy_stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
      (void)s.failed(r, "cuStreamCreate(CU_STREAM_NON_BLOCKING)");
      s.copy_stream = nullptr;
    }
  }
  return s.copy_stream;
}

/// Makes the copy stream wait for the `after` events (the streams that used a range).
errc wait_on_copy_stream(cuda_vmm_device::state& s, CUstream stream, std::span<const event_id> after) {
  for (const event_id id : after) {
    const auto it = s.events.find(id);
    if (it == s.events.end()) return errc::invalid_argument;
    const CUresult r = s.api.stream_wait_event(stream, it->second, 0);
    if (r != CUDA_SUCCESS) return s.failed(r, "cuStreamWaitEvent");
  }
  return errc::ok;
}

/// Enqueues copies of `live` (inside the range at `range`) from the same offsets at `from_base` to
/// `to_base` on the copy stream, after `after`, and records `done` after them.
errc enqueue_copies(cuda_vmm_device::state& s, device_address range, device_address from_base,
                    device_address to_base, std::span<const byte_range> live, std::span<const event_id> after,
                    CUevent done) {
  CUstream stream = copy_stream(s);
  if (stream == nullptr) return errc::device_refused;
  if (const errc e = wait_on_copy_stream(s, stream, after); e != errc::ok) return e;
  for (const byte_range& r : coalesced(live)) {
    const device_address offset = r.addr - range;
    const CUresult c = s.api.memcpy_async(to_ptr(to_base + offset), to_ptr(from_base + offset), r.bytes, stream);
    if (c != CUDA_SUCCESS) return s.failed(c, fmt::format("cuMemcpyAsync({:#x} <- {:#x}, {})", to_base + offset,
                                                          from_base + offset, r.bytes));
  }
  const CUresult r = s.api.event_record(done, stream);
  if (r != CUDA_SUCCESS) return s.failed(r, "cuEventRecord(copy stream)");
  return errc::ok;
}

/// Waits (on the copy stream, then on the host) for the work the `after` events mark.
errc wait_for(cuda_vmm_device::state& s, std::span<const event_id> after) {
  CUstream stream = copy_stream(s);
  if (stream == nullptr) return errc::device_refused;
  if (const errc e = wait_on_copy_stream(s, stream, after); e != errc::ok) return e;
  const CUresult r = s.api.stream_synchronize(stream);
  if (r != CUDA_SUCCESS) return s.failed(r, "cuStreamSynchronize(copy stream)");
  return errc::ok;
}

/// Waits for whatever the copy stream holds, ignoring failures: before a rollback unmaps memory
/// that copies enqueued by a failed step may still touch.
void drain_copy_stream(cuda_vmm_device::state& s) {
  if (s.copy_stream != nullptr) (void)s.api.stream_synchronize(s.copy_stream);
}

/// An event for a move's copies: a spare one, else a new one; nullptr (noted) when none can be made.
CUevent take_move_event(cuda_vmm_device::state& s) {
  if (!s.spare_move_events.empty()) {
    CUevent e = s.spare_move_events.back();
    s.spare_move_events.pop_back();
    return e;
  }
  CUevent e = nullptr;
  const CUresult r = s.api.event_create(&e, CU_EVENT_DISABLE_TIMING);
  if (r != CUDA_SUCCESS) {
    (void)s.failed(r, "cuEventCreate for a move's copies");
    return nullptr;
  }
  return e;
}

/// A staging reservation of `bytes` with `handle` mapped over it, readable and writable by this
/// device; 0 (with the failure noted) when it cannot be made.
device_address map_staging(cuda_vmm_device::state& s, CUmemGenericAllocationHandle handle, std::size_t bytes,
                           errc& err) {
  CUdeviceptr staging = 0;
  CUresult r = s.api.mem_address_reserve(&staging, bytes, s.page_bytes, 0, 0);
  if (r != CUDA_SUCCESS) {
    err = s.failed(r, fmt::format("cuMemAddressReserve({}) for staging", bytes));
    return 0;
  }
  r = s.api.mem_map(staging, bytes, 0, handle, 0);
  if (r == CUDA_SUCCESS) {
    r = s.api.mem_set_access(staging, bytes, s.access.data(), 1);
    if (r == CUDA_SUCCESS) return static_cast<device_address>(staging);
    (void)s.api.mem_unmap(staging, bytes);
  }
  err = s.failed(r, fmt::format("mapping a host-located handle at a staging range of {}", bytes));
  (void)s.api.mem_address_free(staging, bytes);
  return 0;
}

void unmap_staging(cuda_vmm_device::state& s, device_address staging, std::size_t bytes) {
  (void)s.api.mem_unmap(to_ptr(staging), bytes);
  (void)s.api.mem_address_free(to_ptr(staging), bytes);
}

/// Where copies reach `host`: its handle mapped at a staging reservation, or, for a page-locked
/// buffer, the buffer itself (its device address under unified addressing). 0 when it cannot be.
device_address host_staging(cuda_vmm_device::state& s, const cuda_vmm_device::state::host_memory& host,
                            std::size_t bytes, errc& err) {
  if (host.pinned != nullptr) return reinterpret_cast<device_address>(host.pinned);
  return map_staging(s, host.handle, bytes, err);
}

/// Undoes host_staging.
void drop_staging(cuda_vmm_device::state& s, device_address staging, std::size_t bytes) {
  if (!s.host_unmapped) unmap_staging(s, staging, bytes);
}

}  // namespace

CUresult cuda_vmm_device::state::take_host(std::size_t bytes, host_memory& out) {
  auto best = idle_hosts.end();
  for (auto it = idle_hosts.begin(); it != idle_hosts.end(); ++it) {
    if (it->bytes >= bytes && (best == idle_hosts.end() || it->bytes < best->bytes)) best = it;
  }
  if (best != idle_hosts.end()) {
    out = *best;
    idle_host_bytes -= best->bytes;
    idle_hosts.erase(best);
    return CUDA_SUCCESS;
  }
  out = host_memory{.bytes = bytes};
  if (host_unmapped) return api.mem_host_alloc(&out.pinned, bytes, CU_MEMHOSTALLOC_PORTABLE);
  return api.mem_create(&out.handle, bytes, &host_prop, 0);
}

void cuda_vmm_device::state::keep_host(const host_memory& memory) {
  idle_hosts.push_back(memory);
  idle_host_bytes += memory.bytes;
  while (idle_host_bytes > host_cache_bytes && !idle_hosts.empty()) {
    release_host(idle_hosts.front());
    idle_host_bytes -= idle_hosts.front().bytes;
    idle_hosts.erase(idle_hosts.begin());
  }
}

void cuda_vmm_device::state::release_host(const host_memory& memory) {
  if (memory.pinned != nullptr) {
    const CUresult r = api.mem_free_host(memory.pinned);
    if (r != CUDA_SUCCESS) (void)failed(r, "cuMemFreeHost of an offload buffer (leaked)");
  } else {
    const CUresult r = api.mem_release(memory.handle);
    if (r != CUDA_SUCCESS) (void)failed(r, "cuMemRelease of a host-located handle (leaked)");
  }
}

errc cuda_vmm_device::offload(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                              std::span<const event_id> after) noexcept {
  const errc e = offload_start(addr, bytes, live, after);
  return e == errc::ok ? finish_move(addr, {}) : e;
}

errc cuda_vmm_device::restore(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                              std::span<const event_id> after) noexcept {
  const errc e = restore_start(addr, bytes, live, after);
  return e == errc::ok ? finish_move(addr, {}) : e;
}

errc cuda_vmm_device::offload_start(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                                    std::span<const event_id> after) noexcept {
  if (!can_offload(caps_)) return errc::not_supported;
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  std::size_t first = 0;
  state::reservation* res = s.find_pages(addr, bytes, /*mapped=*/true, first);
  if (res == nullptr || s.moving(addr, bytes) || !state::whole_units(*res, first, bytes / s.page_bytes) ||
      !ranges_inside(live, addr, bytes)) {
    return errc::invalid_argument;
  }
  scoped_context ctx(s.api, s.ctx);
  state::host_memory host;
  const CUresult r = s.take_host(bytes, host);
  if (r != CUDA_SUCCESS) {
    return s.failed(r, s.host_unmapped ? fmt::format("cuMemHostAlloc({}) for an offload", bytes)
                                       : fmt::format("cuMemCreate({}, host location)", bytes));
  }
  errc err = errc::ok;
  const device_address staging = host_staging(s, host, bytes, err);
  if (staging == 0) {
    s.keep_host(host);
    return err;
  }
  CUevent done = take_move_event(s);
  err = done == nullptr ? errc::device_refused : enqueue_copies(s, addr, addr, staging, live, after, done);
  if (err != errc::ok) {
    drain_copy_stream(s);
    drop_staging(s, staging, bytes);
    s.keep_host(host);
    if (done != nullptr) s.spare_move_events.push_back(done);
    return err;
  }
  s.moves.emplace(addr, state::move{.restore = false,
                                    .bytes = bytes,
                                    .done = done,
                                    .staging = staging,
                                    .host = host,
                                    .live_bytes = total_bytes(live)});
  return errc::ok;
}

namespace {

/// An offload's finish, its copies done: the device mappings out (handles kept until the host
/// mapping is in), the host memory in. A failure maps the device pages back, contents intact.
errc swap_to_host(cuda_vmm_device::state& s, device_address addr, const cuda_vmm_device::state::move& m) {
  using state = cuda_vmm_device::state;
  std::size_t first = 0;
  state::reservation* res = s.find_range(addr, m.bytes, first);
  const std::size_t count = m.bytes / s.page_bytes;
  const device_address base = addr - first * s.page_bytes;
  CUresult r = CUDA_SUCCESS;
  std::size_t done = first;  // pages of the range unmapped so far, from its first
  for (; done < first + count; done += res->pages[done].unit_pages) {
    r = s.api.mem_unmap(to_ptr(base + done * s.page_bytes), res->pages[done].unit_pages * s.page_bytes);
    if (r != CUDA_SUCCESS) break;
  }
  if (r == CUDA_SUCCESS && !s.host_unmapped) {  // unmapping: the range stays unmapped until its restore
    r = s.api.mem_map(to_ptr(addr), m.bytes, 0, m.host.handle, 0);
    if (r == CUDA_SUCCESS) {
      r = s.api.mem_set_access(to_ptr(addr), m.bytes, s.access.data(), s.access.size());
      if (r != CUDA_SUCCESS) (void)s.api.mem_unmap(to_ptr(addr), m.bytes);
    }
  }
  if (r != CUDA_SUCCESS) {
    const errc err = s.failed(r, fmt::format("moving [{:#x}, +{}) to host memory", addr, m.bytes));
    for (std::size_t i = first; i < done; i += res->pages[i].unit_pages) {
      const device_address back = base + i * s.page_bytes;
      const std::size_t unit_bytes = res->pages[i].unit_pages * s.page_bytes;
      (void)s.api.mem_map(to_ptr(back), unit_bytes, 0, res->pages[i].handle, 0);
      (void)s.api.mem_set_access(to_ptr(back), unit_bytes, s.access.data(), s.access.size());
    }
    s.keep_host(m.host);
    return err;
  }
  for (std::size_t i = first; i < first + count;) {
    const std::size_t n = res->pages[i].unit_pages;
    r = s.api.mem_release(res->pages[i].handle);
    if (r != CUDA_SUCCESS) (void)s.failed(r, "cuMemRelease (handle leaked)");
    for (std::size_t k = i; k < i + n; ++k) res->pages[k] = state::page{.handle = 0, .mapped = true, .host = true};
    i += n;
  }
  s.host_runs[addr] = state::host_run{.memory = m.host, .bytes = m.bytes};
  s.mapped_bytes -= m.bytes;
  s.host_bytes += m.bytes;
  s.run_handle_bytes += m.host.bytes;
  s.moved.to_host += m.live_bytes;
  return errc::ok;
}

}  // namespace

errc cuda_vmm_device::restore_start(device_address addr, std::size_t bytes, std::span<const byte_range> live,
                                    std::span<const event_id> after) noexcept {
  if (!can_offload(caps_)) return errc::not_supported;
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto run = s.host_runs.find(addr);
  if (run == s.host_runs.end() || run->second.bytes != bytes || s.moving(addr, bytes) ||
      !ranges_inside(live, addr, bytes)) {
    return errc::invalid_argument;
  }
  std::size_t first = 0;
  state::reservation* res = s.find_range(addr, bytes, first);
  if (res == nullptr) return errc::invalid_argument;
  const std::size_t count = bytes / s.page_bytes;
  const state::host_memory host = run->second.memory;
  scoped_context ctx(s.api, s.ctx);

  // Device memory first, in chunks of up to restore_chunk_pages (one handle and one mapping each):
  // out of memory here changes nothing.
  std::vector<CUmemGenericAllocationHandle> handles;  // chunk k covers pages [k * chunk, ...)
  const std::size_t chunk = s.restore_chunk_pages;
  const auto chunk_pages = [&](std::size_t k) { return std::min(chunk, count - k * chunk); };
  handles.reserve((count + chunk - 1) / chunk);
  for (std::size_t k = 0; k * chunk < count; ++k) {
    CUmemGenericAllocationHandle h = 0;
    const std::size_t chunk_bytes = chunk_pages(k) * s.page_bytes;
    const CUresult r = s.api.mem_create(&h, chunk_bytes, &s.prop, 0);
    if (r == CUDA_SUCCESS) {
      handles.push_back(h);
      continue;
    }
    const errc err = s.failed(r, fmt::format("cuMemCreate({}) to restore [{:#x}, +{})", chunk_bytes, addr, bytes));
    for (const CUmemGenericAllocationHandle made : handles) (void)s.api.mem_release(made);
    return err;
  }
  const auto drop_handles = [&] {
    for (const CUmemGenericAllocationHandle h : handles) (void)s.api.mem_release(h);
  };
  CUevent done = take_move_event(s);
  if (done == nullptr) {
    drop_handles();
    return errc::device_refused;
  }
  errc err = errc::ok;
  const device_address staging = host_staging(s, host, bytes, err);
  if (staging == 0) {
    drop_handles();
    s.spare_move_events.push_back(done);
    return err;
  }
  // Wait for the streams that used the range before its mapping changes under them (on the host:
  // the host mapping goes at once). An unmapped range had no user since its offload's finish.
  if (!s.host_unmapped) err = wait_for(s, after);
  CUresult r = err == errc::ok && !s.host_unmapped ? s.api.mem_unmap(to_ptr(addr), bytes) : CUDA_SUCCESS;
  if (err != errc::ok || r != CUDA_SUCCESS) {
    if (r != CUDA_SUCCESS) err = s.failed(r, fmt::format("cuMemUnmap({:#x}, {}) of a host-backed range", addr, bytes));
    drop_staging(s, staging, bytes);
    drop_handles();
    s.spare_move_events.push_back(done);
    return err;
  }
  std::size_t mapped = 0;  // chunks mapped
  for (; mapped < handles.size(); ++mapped) {
    r = s.api.mem_map(to_ptr(addr + mapped * chunk * s.page_bytes), chunk_pages(mapped) * s.page_bytes, 0,
                      handles[mapped], 0);
    if (r != CUDA_SUCCESS) break;
  }
  if (r == CUDA_SUCCESS) r = s.api.mem_set_access(to_ptr(addr), bytes, s.access.data(), s.access.size());
  if (r == CUDA_SUCCESS) err = enqueue_copies(s, addr, staging, addr, live, {}, done);
  if (r != CUDA_SUCCESS || err != errc::ok) {  // the range as it was: host-backed (still correct), or unmapped
    if (r != CUDA_SUCCESS) err = s.failed(r, fmt::format("mapping device pages at [{:#x}, +{})", addr, bytes));
    drain_copy_stream(s);
    for (std::size_t k = 0; k < mapped; ++k) {
      (void)s.api.mem_unmap(to_ptr(addr + k * chunk * s.page_bytes), chunk_pages(k) * s.page_bytes);
    }
    if (!s.host_unmapped) {
      (void)s.api.mem_map(to_ptr(addr), bytes, 0, host.handle, 0);
      (void)s.api.mem_set_access(to_ptr(addr), bytes, s.access.data(), s.access.size());
    }
    drop_staging(s, staging, bytes);
    drop_handles();
    s.spare_move_events.push_back(done);
    return err;
  }
  // The range is device memory from here (its bytes arrive with the copies); the host handle stays
  // in host_runs, mapped at the staging range, until finish_move.
  for (std::size_t k = 0; k < handles.size(); ++k) state::set_unit(*res, first + k * chunk, chunk_pages(k), handles[k]);
  s.mapped_bytes += bytes;
  s.moves.emplace(addr, state::move{.restore = true,
                                    .bytes = bytes,
                                    .done = done,
                                    .staging = staging,
                                    .host = {},  // its host_run's
                                    .live_bytes = total_bytes(live)});
  return errc::ok;
}

result<bool> cuda_vmm_device::move_done(device_address addr) noexcept {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto it = s.moves.find(addr);
  if (it == s.moves.end()) return true;
  scoped_context ctx(s.api, s.ctx);
  const CUresult r = s.api.event_query(it->second.done);
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  return s.failed(r, "cuEventQuery(a move's copies)");
}

errc cuda_vmm_device::order_after_move(device_address addr, stream_id stream) noexcept {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto it = s.moves.find(addr);
  if (it == s.moves.end()) return errc::ok;
  scoped_context ctx(s.api, s.ctx);
  const CUresult r = s.api.stream_wait_event(reinterpret_cast<CUstream>(stream), it->second.done, 0);
  if (r != CUDA_SUCCESS) return s.failed(r, "cuStreamWaitEvent(a stream after a move's copies)");
  return errc::ok;
}

errc cuda_vmm_device::finish_move(device_address addr, std::span<const event_id> after) noexcept {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  const auto it = s.moves.find(addr);
  if (it == s.moves.end()) return errc::ok;
  scoped_context ctx(s.api, s.ctx);
  const state::move m = it->second;
  if (!m.restore) {  // work queued since the start that may touch the range, before its mapping changes
    if (const errc e = wait_for(s, after); e != errc::ok) return e;
  }
  const CUresult r = s.api.event_synchronize(m.done);
  if (r != CUDA_SUCCESS) {  // the copies' fate is unknown: the move stays in flight, nothing is dropped
    return s.failed(r, fmt::format("cuEventSynchronize(the copies of [{:#x}, +{}))", addr, m.bytes));
  }
  s.moves.erase(it);
  s.spare_move_events.push_back(m.done);
  drop_staging(s, m.staging, m.bytes);
  if (!m.restore) return swap_to_host(s, addr, m);
  const auto run = s.host_runs.find(addr);
  PHASEALLOC_CHECK(run != s.host_runs.end(), "restore of [{:#x}, +{}) in flight without its host run", addr, m.bytes);
  s.keep_host(run->second.memory);  // the next offload copies into it
  s.run_handle_bytes -= run->second.memory.bytes;
  s.host_runs.erase(run);
  s.host_bytes -= m.bytes;
  s.moved.to_device += m.live_bytes;
  return errc::ok;
}

std::size_t cuda_vmm_device::moves_in_flight() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->moves.size();
}

std::size_t cuda_vmm_device::host_backed_bytes() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->host_bytes;
}

std::size_t cuda_vmm_device::host_held_bytes() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->run_handle_bytes + state_->idle_host_bytes;
}

device::moved_bytes cuda_vmm_device::moved() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->moved;
}

}  // namespace phasealloc
