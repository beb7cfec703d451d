#include "bridge_allocator.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <c10/cuda/CUDAAllocatorConfig.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include "books.hpp"
#include "usage_reports.hpp"
#include "phasealloc_c_api.h"

namespace phasealloc::c10_bridge {
namespace {

constexpr int max_devices = 64;  // phasealloc's ordinals (interpose/src/engine_registry.hpp)

std::atomic<bridge_allocator*> g_bridge{nullptr};

// One deleter per ordinal: a DataPtr's deleter then names both the owner (phasealloc) and the
// device, with no per-allocation context to allocate.
template <int device>
void delete_on(void* ptr) {
  bridge_allocator::free_engine_block(ptr, device);
}

template <std::size_t... devices>
constexpr std::array<c10::DeleterFnPtr, sizeof...(devices)> make_deleters(std::index_sequence<devices...>) {
  return {&delete_on<static_cast<int>(devices)>...};
}

constexpr std::array<c10::DeleterFnPtr, max_devices> k_deleters = make_deleters(std::make_index_sequence<max_devices>{});

void raw_delete_fn(void* ptr) {
  if (bridge_allocator* bridge = g_bridge.load(std::memory_order_acquire)) bridge->raw_delete(ptr);
}

// PyTorch's graph code recognises a private pool's storages by the allocator's raw_deleter():
// cudagraph trees free a path's outputs with _free_And_Remove_DeleterFn (which swaps exactly that
// deleter out, then calls raw_delete) and assert it on the storages a checkpoint restores. A block
// native hands out under the bridge therefore carries the bridge's raw deleter, which frees it
// through raw_delete (native, found by address). Native's DataPtr context is the pointer itself.
c10::DataPtr with_raw_deleter(c10::DataPtr data, c10::DeleterFnPtr native_deleter) {
  void* ptr = data.get();
  if (ptr == nullptr || data.get_deleter() != native_deleter || data.get_context() != ptr) return data;
  const c10::Device where = data.device();
  (void)data.release_context();
  return {ptr, ptr, &raw_delete_fn, where};
}

// The engine's out-of-memory message while native tries a use_on_oom pool for the same request.
thread_local std::string t_oom_message;

// Native is serving a request of this thread. A MemPool built around the bridge itself
// (MemPool(torch.cuda.memory._get_current_allocator().allocator())) makes native call back into the
// bridge for the pool's segments: those come from phasealloc's engine, never routed to native again.
thread_local int t_in_native = 0;
struct in_native_scope {
  in_native_scope() { ++t_in_native; }
  ~in_native_scope() { --t_in_native; }
  in_native_scope(const in_native_scope&) = delete;
  in_native_scope& operator=(const in_native_scope&) = delete;
};

bool is_default_pool(c10::MempoolId_t pool) { return pool.first == 0 && pool.second == 0; }

}  // namespace

bridge_allocator::bridge_allocator(cca::CUDAAllocator* native) : native_(native), cap_(native) {
  TORCH_INTERNAL_ASSERT(native_ != nullptr, "phasealloc: no native CUDA allocator to keep");
  g_bridge.store(this, std::memory_order_release);
}

bridge_allocator* bridge_allocator::instance() { return g_bridge.load(std::memory_order_acquire); }

bool bridge_allocator::owns(const c10::DataPtr& data) {
  const c10::DeleterFnPtr deleter = data.get_deleter();
  return std::find(k_deleters.begin(), k_deleters.end(), deleter) != k_deleters.end();
}

void bridge_allocator::free_engine_block(void* ptr, int device) {
  bridge_allocator* bridge = g_bridge.load(std::memory_order_acquire);
  trace_deallocation(ptr);
  {
    memory_history::pending_guard pending(bridge != nullptr ? bridge->history_.gather_for_free() : nullptr);
    phasealloc_free(ptr, 0, device, nullptr);
  }
  if (t_profiled.pending) [[unlikely]] report_to_profiler();
}

// --- allocation ------------------------------------------------------------------------------------

void* bridge_allocator::engine_malloc(std::size_t bytes, c10::DeviceIndex device, cudaStream_t stream) {
  TORCH_CHECK(device >= 0 && device < max_devices, "phasealloc: device ", static_cast<int>(device),
              " is beyond the ", max_devices, " GPUs phasealloc handles");
  if (cap_.stale(device)) cap_.refresh_engine(device);
  const auto try_malloc = [&] {
    memory_history::pending_guard pending(history_.gather_for_alloc());
    return phasealloc_try_malloc(static_cast<ssize_t>(bytes), device, stream);
  };
  void* ptr = try_malloc();
  if (ptr != nullptr) [[likely]] {
    if (t_profiled.pending) [[unlikely]] report_to_profiler();
    trace_allocation(ptr);
    return ptr;
  }
  // This thread's failure (never another thread's last error): whether it is out of memory.
  int out_of_memory = 0;
  std::string message = phasealloc_last_malloc_failure(&out_of_memory);
  // Out of memory while PyTorch's allocator caches free blocks (graph pools, MemPools): PyTorch
  // frees its cache before it gives up, so the bridge frees native's too, and tries once more.
  if (out_of_memory != 0 && release_native_cache(device)) {
    ptr = try_malloc();
    if (ptr != nullptr) {
      if (t_profiled.pending) report_to_profiler();
      trace_allocation(ptr);
      return ptr;
    }
    message = phasealloc_last_malloc_failure(&out_of_memory);
  }
  TORCH_CHECK(out_of_memory != 0, message);
  // Native still caches enough free memory, in pools its cache release may not touch: one made
  // with MemPool(use_on_oom=True) serves ordinary requests once the device is full, as PyTorch's
  // allocator does for its own requests. The caller asks native, which knows which pools may serve.
  if (native_may_serve(device, bytes)) {
    t_oom_message = std::move(message);
    return nullptr;
  }
  report_oom(device, bytes, stream, message);
  C10_THROW_ERROR(OutOfMemoryError, message);
}

bool bridge_allocator::native_may_serve(c10::DeviceIndex device, std::size_t bytes) {
  if (!native_->initialized()) return false;
  const auto stats = native_->getDeviceStats(device);
  return stats.reserved_bytes[0].current - stats.allocated_bytes[0].current >= static_cast<int64_t>(bytes);
}

template <class F>
auto bridge_allocator::in_native(c10::DeviceIndex device, F&& native_call) -> decltype(native_call()) {
  cap_.before_native(device);
  const in_native_scope scope;
  try {
    auto result = native_call();
    cap_.after_native(device);
    native_changed(device);
    return result;
  } catch (...) {
    cap_.after_native(device);
    throw;
  }
}

template <class F>
auto bridge_allocator::after_oom_from_native(F&& native_call) -> decltype(native_call()) {
  const std::string message = std::move(t_oom_message);
  try {
    return native_call();
  } catch (const c10::OutOfMemoryError&) {
    // Native reported it (its history and the OOM observers); the error says what phasealloc saw.
    C10_THROW_ERROR(OutOfMemoryError, message);
  }
}

void bridge_allocator::report_oom(c10::DeviceIndex device, std::size_t bytes, cudaStream_t stream,
                                  const std::string& /*message*/) {
  std::size_t free_bytes = 0, total_bytes = 0;
  {
    c10::cuda::CUDAGuard guard(device);
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
  }
  {
    memory_history::pending_guard pending(history_.gather_for_alloc());  // the OOM entry's frames
    history_.on_oom(device, free_bytes, bytes, stream);
  }
  std::vector<cca::OutOfMemoryObserver> observers;
  {
    std::lock_guard lock(observers_mutex_);
    observers = oom_observers_;
  }
  if (observers.empty()) return;
  const auto allocated = static_cast<std::size_t>(engine_stats(device).allocated_bytes[0].current);
  for (const auto& observer : observers) observer(device, allocated, total_bytes, free_bytes);
}

bool bridge_allocator::release_native_cache(c10::DeviceIndex device) {
  if (!native_->initialized() || routes_.any()) return false;
  const auto stats = native_->getDeviceStats(device);
  if (stats.reserved_bytes[0].current <= stats.allocated_bytes[0].current) return false;
  {
    const in_native_scope scope;  // native gives back the segments phasealloc lent it (raw_delete)
    native_->emptyCache({0, 0});
  }
  cap_.after_native(device);
  native_changed(-1);
  return true;
}

c10::DataPtr bridge_allocator::native_pool_allocate(std::size_t bytes, c10::DeviceIndex device) {
  return in_native(device, [&] { return with_raw_deleter(native_->allocate(bytes), native_->raw_deleter()); });
}

void bridge_allocator::native_changed(c10::DeviceIndex device) {
  if (!native_->initialized()) return;
  const int first = device >= 0 ? device : 0;
  const int last = device >= 0 ? device + 1 : std::max(device_count_.load(std::memory_order_relaxed), 1);
  for (int d = first; d < last; ++d) {
    const auto stats = native_->getDeviceStats(static_cast<c10::DeviceIndex>(d));
    peaks_.on_native_change(d, stats.allocated_bytes[0].current, stats.reserved_bytes[0].current);
  }
}

c10::DataPtr bridge_allocator::allocate(std::size_t bytes) {
  const c10::DeviceIndex device = c10::cuda::current_device();
  const c10::Device where(c10::DeviceType::CUDA, device);
  if (bytes == 0) return {nullptr, where};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
  if (!isEnabled() || routes_.routed(device, stream)) return native_pool_allocate(bytes, device);
  void* ptr = engine_malloc(bytes, device, stream);
  if (ptr == nullptr) [[unlikely]] return after_oom_from_native([&] { return native_pool_allocate(bytes, device); });
  return {ptr, ptr, k_deleters[static_cast<std::size_t>(device)], where};
}

c10::DeleterFnPtr bridge_allocator::raw_deleter() const { return &raw_delete_fn; }

void bridge_allocator::copy_data(void* dest, const void* src, std::size_t count) const {
  C10_CUDA_CHECK(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice));
}

void* bridge_allocator::raw_alloc(std::size_t bytes) {
  const c10::DeviceIndex device = c10::cuda::current_device();
  return raw_alloc_with_stream(bytes, c10::cuda::getCurrentCUDAStream(device).stream());
}

void* bridge_allocator::raw_alloc_with_stream(std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return nullptr;
  const c10::DeviceIndex device = c10::cuda::current_device();
  const bool to_native = t_in_native == 0 && (!isEnabled() || routes_.routed(device, stream));
  const auto native_alloc = [&] { return in_native(device, [&] { return native_->raw_alloc_with_stream(bytes, stream); }); };
  void* ptr = to_native ? native_alloc() : engine_malloc(bytes, device, stream);
  bool native_owns = to_native;
  if (ptr == nullptr) [[unlikely]] {
    ptr = after_oom_from_native(native_alloc);
    native_owns = true;
  }
  try {
    std::lock_guard lock(raw_mutex_);
    raw_owner_[ptr] = native_owns ? -1 : device;
    if (!native_owns && t_in_native != 0) {  // native's segment for a pool around the bridge
      lent_[reinterpret_cast<std::uintptr_t>(ptr)] = bytes;
      lent_count_.store(lent_.size(), std::memory_order_relaxed);
    }
  } catch (...) {
    // Out of host memory for the maps: raw_delete still finds the owner by address.
  }
  return ptr;
}

int bridge_allocator::engine_owner(const void* ptr) {
  if (lent_count_.load(std::memory_order_relaxed) != 0) {
    const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
    std::lock_guard lock(raw_mutex_);
    auto it = lent_.upper_bound(addr);
    if (it != lent_.begin() && addr < std::prev(it)->first + std::prev(it)->second) return -1;
  }
  return phasealloc_owner_device(ptr);
}

void bridge_allocator::raw_delete(void* ptr) {
  if (ptr == nullptr) return;
  int owner = -2;  // unknown
  {
    std::lock_guard lock(raw_mutex_);
    const auto lent = lent_.find(reinterpret_cast<std::uintptr_t>(ptr));
    // A lent segment's start is also the address of native's first block in it: native gives
    // the segment back from inside a call the bridge made (t_in_native); a storage freed from
    // anywhere else is native's block.
    if (lent != lent_.end() && t_in_native == 0) {
      owner = -1;
    } else if (const auto it = raw_owner_.find(ptr); it != raw_owner_.end()) {
      owner = it->second;
      raw_owner_.erase(it);
      if (lent != lent_.end()) {
        lent_.erase(lent);
        lent_count_.store(lent_.size(), std::memory_order_relaxed);
      }
    }
  }
  if (owner == -2) owner = engine_owner(ptr);
  if (owner >= 0) {
    free_engine_block(ptr, owner);
  } else {
    native_->raw_delete(ptr);
    native_changed(-1);  // which device's pool held it is native's to know
  }
}

void bridge_allocator::init(int device_count) {
  native_->init(device_count);
  phasealloc_init(device_count);
  // PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction caps phasealloc's memory too.
  if (const double fraction = cca::CUDAAllocatorConfig::per_process_memory_fraction(); fraction < 1.0) {
    cap_.set_all(fraction);
  }
  device_count_.store(device_count, std::memory_order_relaxed);
  initialized_.store(true, std::memory_order_release);
}

void bridge_allocator::releasePool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  const in_native_scope scope;  // native may give back segments phasealloc lent it (raw_delete)
  native_->releasePool(device, pool);
}

void bridge_allocator::emptyCache(c10::MempoolId_t pool) {
  if (is_default_pool(pool)) {
    // The segments it frees carry the caller's stack under context="all", as PyTorch's do.
    memory_history::pending_guard pending(history_.gather_for_free());
    phasealloc_reset();
  }
  {
    const in_native_scope scope;  // native gives back the segments phasealloc lent it (raw_delete)
    native_->emptyCache(pool);
  }
  for (int d = 0; d < device_count_.load(std::memory_order_relaxed); ++d) cap_.after_native(static_cast<c10::DeviceIndex>(d));
  native_changed(-1);
}

void bridge_allocator::recordStream(const c10::DataPtr& data, c10::cuda::CUDAStream stream) {
  if (owns(data) || (data.get_deleter() == &raw_delete_fn && engine_owner(data.get()) >= 0)) {
    phasealloc_record_stream(data.get(), stream.stream());
  } else if (data.get_deleter() == &raw_delete_fn && data.get() != nullptr) {
    // A native block under the bridge's raw deleter: native recognises its own blocks by its own
    // deleter, so it is shown one that borrows the pointer (and never frees it).
    c10::DataPtr borrowed(data.get(), data.get(), native_->raw_deleter(), data.device());
    native_->recordStream(borrowed, stream);
    (void)borrowed.release_context();
  } else {
    native_->recordStream(data, stream);
  }
}

double bridge_allocator::getMemoryFraction(c10::DeviceIndex device) { return cap_.fraction(device); }

void bridge_allocator::setMemoryFraction(double fraction, c10::DeviceIndex device) {
  TORCH_CHECK(fraction >= 0.0 && fraction <= 1.0, "invalid fraction: ", fraction, ". Please set within [0, 1].");
  cap_.set(device, fraction);
}

std::vector<cca::StreamSegmentSize> bridge_allocator::getExpandableSegmentSizes(c10::DeviceIndex device) {
  return native_->getExpandableSegmentSizes(device);
}

void bridge_allocator::enable(bool value) {
  enabled_.store(value, std::memory_order_relaxed);
  native_->enable(value);
}

void bridge_allocator::cacheInfo(c10::DeviceIndex device, std::size_t* largest_block) {
  native_->cacheInfo(device, largest_block);  // starts from the device's free bytes when *largest_block is 0
  *largest_block = std::max(*largest_block, engine_largest_free_block(device));
}

void* bridge_allocator::getBaseAllocation(void* ptr, std::size_t* size) {
  if (engine_owner(ptr) < 0) return native_->getBaseAllocation(ptr, size);
  // As PyTorch's allocator answers: the segment that holds the block, and the segment's size.
  const auto addr = reinterpret_cast<std::size_t>(ptr);
  for (const auto& segment : engine_segments()) {
    if (addr >= segment.address && addr < segment.address + segment.total_size) {
      if (size != nullptr) *size = segment.total_size;
      return reinterpret_cast<void*>(segment.address);
    }
  }
  TORCH_CHECK(false, "phasealloc: getBaseAllocation(", ptr, "): no segment of phasealloc's holds this pointer");
}

// --- books ---------------------------------------------------------------------------------------------

c10::CachingDeviceAllocator::DeviceStats bridge_allocator::getDeviceStats(c10::DeviceIndex device) {
  auto stats = engine_stats(device);
  if (initialized()) {
    // Native's private pools (MemPool, graphs) count whenever they hold or have held memory; the
    // current values decide too, so reset_accumulated_memory_stats() does not hide what they hold.
    const auto native = native_->getDeviceStats(device);
    if (native.reserved_bytes[0].current > 0 || native.reserved_bytes[0].allocated > 0 ||
        native.allocation[0].allocated > 0) {
      add_stats(stats, native);
      // The peaks of the sums, not the sums of the two peaks (they may come at different times).
      stats.allocated_bytes[0].peak = peaks_.allocated_peak(device);
      stats.reserved_bytes[0].peak = peaks_.reserved_peak(device);
    }
  }
  return stats;
}

void bridge_allocator::resetAccumulatedStats(c10::DeviceIndex device) {
  TORCH_CHECK(phasealloc_reset_accumulated_stats(device) == 0, "phasealloc: ", phasealloc_last_error());
  if (initialized()) native_->resetAccumulatedStats(device);
}

void bridge_allocator::resetPeakStats(c10::DeviceIndex device) {
  TORCH_CHECK(phasealloc_reset_peak_stats(device) == 0, "phasealloc: ", phasealloc_last_error());
  if (initialized()) native_->resetPeakStats(device);
  peaks_.reset(device);
}

cca::SnapshotInfo bridge_allocator::snapshot(c10::MempoolId_t pool, bool include_traces) {
  if (!is_default_pool(pool)) return native_->snapshot(pool, include_traces);  // a MemPool's: native's
  cca::SnapshotInfo out = native_->snapshot(pool, include_traces);
  for (auto& segment : engine_segments()) {
    std::size_t addr = segment.address;
    for (auto& block : segment.blocks) {
      if (block.active) block.context_when_allocated = history_.block_context(addr);
      if (!block.allocated && block.requested_size == 0) block.requested_size = history_.freed_requested_bytes(addr);
      addr += block.size;
    }
    out.segments.push_back(std::move(segment));
  }
  std::sort(out.segments.begin(), out.segments.end(),
            [](const auto& a, const auto& b) { return std::pair(a.device, a.address) < std::pair(b.device, b.address); });
  if (include_traces) {
    const auto devices = static_cast<std::size_t>(std::max(device_count_.load(std::memory_order_relaxed), 1));
    if (out.device_traces.size() < devices) out.device_traces.resize(devices);
    for (std::size_t d = 0; d < out.device_traces.size(); ++d) {
      auto& traces = out.device_traces[d];
      auto ours = history_.entries(static_cast<c10::DeviceIndex>(d));
      traces.insert(traces.end(), std::make_move_iterator(ours.begin()), std::make_move_iterator(ours.end()));
      std::stable_sort(traces.begin(), traces.end(),
                       [](const auto& a, const auto& b) { return a.time_.t_ < b.time_.t_; });
    }
  }
  return out;
}

#if PHASEALLOC_TORCH_HAS_CONTEXT_FOR_POINTER
std::shared_ptr<c10::GatheredContext> bridge_allocator::getContextForPointer(const void* ptr) {
  if (engine_owner(ptr) >= 0) return history_.block_context(reinterpret_cast<std::size_t>(ptr));
  return native_->getContextForPointer(ptr);
}
#endif

void bridge_allocator::recordHistory(bool enabled, cca::CreateContextFn recorder, std::size_t max_entries,
                                     cca::RecordContext when, bool clear,
                                     const std::vector<std::string>& skip_actions) {
  history_.configure(enabled, recorder, max_entries, when, clear, skip_actions);
  native_->recordHistory(enabled, recorder, max_entries, when, clear, skip_actions);
}

void bridge_allocator::recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) {
  native_->recordAnnotation(md);  // kept in native's external_annotations, which the snapshot returns
}

void bridge_allocator::attachOutOfMemoryObserver(cca::OutOfMemoryObserver observer) {
  {
    std::lock_guard lock(observers_mutex_);
    oom_observers_.push_back(observer);
  }
  native_->attachOutOfMemoryObserver(std::move(observer));
}

#if PHASEALLOC_TORCH_HAS_OOM_REJECTION
void bridge_allocator::attachOomRejectionObserver(cca::OomRejectionObserver observer) {
  native_->attachOomRejectionObserver(std::move(observer));
}
#endif

void bridge_allocator::attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker) {
  history_.attach_tracker(tracker);
  native_->attachAllocatorTraceTracker(std::move(tracker));
}

void bridge_allocator::on_engine_event(const phasealloc_event* event, void* self) noexcept {
  static_cast<bridge_allocator*>(self)->peaks_.on_engine_event(event->device, event->action, event->block_bytes,
                                                               event->reserved_bytes);
  note_for_profiler(*event);
  static_cast<bridge_allocator*>(self)->history_.on_event(*event);
}

void bridge_allocator::pushCompileContext(std::string& md) {
  history_.push_compile_context(md);
  native_->pushCompileContext(md);
}

void bridge_allocator::popCompileContext() {
  history_.pop_compile_context();
  native_->popCompileContext();
}

void bridge_allocator::setUserMetadata(const std::string& metadata) {
  history_.set_user_metadata(metadata);
  native_->setUserMetadata(metadata);
}

#if PHASEALLOC_TORCH_HAS_ANNOTATE_MEMORY
void bridge_allocator::annotateMemory(const void* ptr, const std::string& metadata) {
  if (const int device = engine_owner(ptr); device >= 0) {
    history_.annotate(static_cast<c10::DeviceIndex>(device), reinterpret_cast<std::size_t>(ptr), metadata);
  } else {
    native_->annotateMemory(ptr, metadata);
  }
}
#endif

// --- pools, IPC, peers ---------------------------------------------------------------------------------

cca::CheckpointDelta bridge_allocator::setCheckpointPoolState(c10::DeviceIndex device,
                                                              std::shared_ptr<cca::AllocatorState> state) {
  cca::CheckpointDelta delta = native_->setCheckpointPoolState(device, std::move(state));
  native_changed(device);
  for (auto& data : delta.dataptrs_allocd) data = with_raw_deleter(std::move(data), native_->raw_deleter());
  return delta;
}

#if PHASEALLOC_TORCH_HAS_ALLOCATE_WITH_ADDRESS
c10::DataPtr bridge_allocator::allocateWithAddress(std::size_t size, void* addr) {
  c10::DataPtr data = native_->allocateWithAddress(size, addr);
  native_changed(data.device().index());
  return with_raw_deleter(std::move(data), native_->raw_deleter());
}
#endif

void bridge_allocator::beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool,
                                           std::function<bool(cudaStream_t)> filter) {
  native_->beginAllocateToPool(device, pool, filter);
  // As PyTorch's allocator while any route (capture) is under way: no synchronising frees.
  std::lock_guard lock(hold_mutex_);
  routes_.begin(device, pool, std::move(filter));
  TORCH_CHECK(phasealloc_hold_device_calls(device, 1) == 0, "phasealloc: ", phasealloc_last_error());
}

void bridge_allocator::endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  {
    std::lock_guard lock(hold_mutex_);
    routes_.end(device, pool);
    if (routes_.count(device) == 0) {
      TORCH_CHECK(phasealloc_hold_device_calls(device, 0) == 0, "phasealloc: ", phasealloc_last_error());
    }
  }
  native_->endAllocateToPool(device, pool);
}

cca::ShareableHandle bridge_allocator::shareIpcHandle(void* ptr) {
  TORCH_CHECK(engine_owner(ptr) < 0,
              "phasealloc: CUDA IPC export of memory phasealloc holds (", ptr,
              ") goes through torch.UntypedStorage._share_cuda_, which phasealloc wraps to move the storage to "
              "PyTorch's allocator first; this export called shareIpcHandle directly. Allocate the tensors you "
              "share inside `with torch.cuda.use_mem_pool(torch.cuda.MemPool()):`, or run this process with "
              "PHASEALLOC=0.");
  return native_->shareIpcHandle(ptr);
}

void bridge_allocator::enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) {
  native_->enablePeerAccess(dev, dev_to_access);
  TORCH_CHECK(phasealloc_enable_peer_access(dev_to_access, dev) == 0, "phasealloc: ", phasealloc_last_error());
}

cudaError_t bridge_allocator::memcpyAsync(void* dst, int dst_device, const void* src, int src_device,
                                          std::size_t count, cudaStream_t stream, bool p2p_enabled) {
  // A copy between GPUs that touches phasealloc's memory goes through cudaMemcpyPeerAsync even with
  // peer access on: its pages are mapped for a peer only once PyTorch enabled that pair
  // (enablePeerAccess), and a pair enabled the other way round does not cover this copy.
  const bool ours = phasealloc_owner_device(dst) >= 0 || phasealloc_owner_device(src) >= 0;
  if (dst_device == src_device || (p2p_enabled && !ours)) {
    return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
  }
  return cudaMemcpyPeerAsync(dst, dst_device, src, src_device, count, stream);
}

}  // namespace phasealloc::c10_bridge
