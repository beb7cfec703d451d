// The c10 bridge: phasealloc as PyTorch's CUDA allocator object (a c10 CUDAAllocator), with
// PyTorch's native allocator kept alongside for what only it implements.
//
// Glossary
//   bridge    this allocator: current CUDA allocator of the process after phasealloc.enable().
//   native    the allocator PyTorch had before the swap (its caching allocator), kept alive.
//   route     an active beginAllocateToPool (graph capture, use_mem_pool): allocations it
//             accepts go to native's private pool (pool_routes.hpp).
//
// Design note
// Rationale: through CUDAPluggableAllocator phasealloc gets malloc and free only: PyTorch then
//   refuses MemPool (createOrIncrefPool), CUDA graph pools, CUDA IPC, memory stats, snapshots and
//   history (c10/cuda/CUDAPluggableAllocator.cpp answers each "does not yet support"), which breaks
//   vLLM sleep mode, torch_memory_saver, vLLM's CUDA graphs and every framework that logs
//   torch.cuda.max_memory_allocated(). A full CUDAAllocator, built against the torch it runs in,
//   answers all of them through PyTorch's own entry points.
// Approach: ordinary allocations go to phasealloc's engines (the C API of libphasealloc_torch.so);
//   private pools, graph capture, checkpointed pool state and IPC receive are delegated to the
//   native allocator, which owns those semantics; frees reach whoever allocated (the DataPtr's
//   deleter says so; raw pointers are looked up). Blocks native hands out under the bridge carry
//   the bridge's raw_deleter(), which PyTorch's graph code (cudagraph trees, checkpointed pool
//   state) takes as the mark of a pool's storage. A MemPool built around the bridge
//   (phasealloc.graph_pool()) gets its segments from the engine: the bridge books them as lent
//   (lent_), so a free of native's block at a lent segment's start (the same address) goes to
//   native, and only native itself, inside a call the bridge made (emptyCache, releasePool, an
//   allocation), gives the segment back. One per-process memory fraction caps both
//   (memory_cap.hpp). Out of memory, the bridge does what PyTorch's allocator does before it gives
//   up: frees native's cache, then lets native serve from a MemPool(use_on_oom=True). While a
//   capture or pool route runs, the device's engine frees nothing. Stats and snapshots are
//   phasealloc's books plus native's (when native holds or held memory), with the allocated and
//   reserved peaks those of the sums (combined_peak.hpp); history comes from memory_history.
// Limitations: built per torch version (the class layout is torch's); CUDA IPC export of memory
//   phasealloc holds works only through the package's _share_cuda_ wrapper, which moves the
//   storage to native first (ipc_rehome.cpp); called directly, shareIpcHandle refuses it with an
//   error.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <c10/cuda/CUDACachingAllocator.h>

#include "combined_peak.hpp"
#include "memory_cap.hpp"
#include "memory_history.hpp"
#include "pool_routes.hpp"

namespace phasealloc::c10_bridge {

namespace cca = c10::cuda::CUDACachingAllocator;

class bridge_allocator final : public cca::CUDAAllocator {
 public:
  explicit bridge_allocator(cca::CUDAAllocator* native);

  /// The installed bridge (nullptr before phasealloc_c10_install).
  static bridge_allocator* instance();
  /// A block from the native allocator on the current device and stream (ipc_rehome.cpp).
  c10::DataPtr native_allocate(std::size_t bytes) { return native_->allocate(bytes); }

  /// Whether `data` was allocated by phasealloc through this bridge.
  static bool owns(const c10::DataPtr& data);
  /// Frees a pointer phasealloc allocated on `device` (the DataPtr deleters end here).
  static void free_engine_block(void* ptr, int device);

  // c10::Allocator
  c10::DataPtr allocate(std::size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  // c10::DeviceAllocator
  bool initialized() override { return initialized_.load(std::memory_order_acquire); }
  void emptyCache(c10::MempoolId_t pool) override;
  using cca::CUDAAllocator::recordStream;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;

  // CUDAAllocator: allocation
  void* raw_alloc(std::size_t bytes) override;
  void* raw_alloc_with_stream(std::size_t bytes, cudaStream_t stream) override;
  void raw_delete(void* ptr) override;
  void init(int device_count) override;
  double getMemoryFraction(c10::DeviceIndex device) override;
  void setMemoryFraction(double fraction, c10::DeviceIndex device) override;
  std::vector<cca::StreamSegmentSize> getExpandableSegmentSizes(c10::DeviceIndex device) override;
  void enable(bool value) override;
  bool isEnabled() const override { return enabled_.load(std::memory_order_relaxed); }
  void cacheInfo(c10::DeviceIndex device, std::size_t* largest_block) override;
  void* getBaseAllocation(void* ptr, std::size_t* size) override;
  void recordStream(const c10::DataPtr& data, c10::cuda::CUDAStream stream) override;

  // CUDAAllocator: books and history
  cca::SnapshotInfo snapshot(c10::MempoolId_t pool, bool include_traces) override;
  bool isHistoryEnabled() override { return history_.enabled(); }
#if PHASEALLOC_TORCH_HAS_CONTEXT_FOR_POINTER
  std::shared_ptr<c10::GatheredContext> getContextForPointer(const void* ptr) override;
#endif
  void recordHistory(bool enabled, cca::CreateContextFn recorder, std::size_t max_entries, cca::RecordContext when,
                     bool clear, const std::vector<std::string>& skip_actions) override;
  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) override;
  void pushCompileContext(std::string& md) override;
  void popCompileContext() override;
#if PHASEALLOC_TORCH_HAS_USER_METADATA_SUPPORT
  bool supportsUserMetadata() override { return true; }
#endif
  void setUserMetadata(const std::string& metadata) override;
  std::string getUserMetadata() override { return history_.user_metadata(); }
#if PHASEALLOC_TORCH_HAS_ANNOTATE_MEMORY
  void annotateMemory(const void* ptr, const std::string& metadata) override;
#endif
  void attachOutOfMemoryObserver(cca::OutOfMemoryObserver observer) override;
#if PHASEALLOC_TORCH_HAS_OOM_REJECTION
  void attachOomRejectionObserver(cca::OomRejectionObserver observer) override;
#endif
  void attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker) override;

  // CUDAAllocator: private pools and graphs (native's)
  void beginAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool,
                           std::function<bool(cudaStream_t)> filter) override;
  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t pool) override;
#if PHASEALLOC_TORCH_HAS_CAPTURE_MARKS
  void markCaptureBegin(c10::DeviceIndex device) override { native_->markCaptureBegin(device); }
  void markCaptureEnd(c10::DeviceIndex device) override { native_->markCaptureEnd(device); }
#endif
  void releasePool(c10::DeviceIndex device, c10::MempoolId_t pool) override;
  int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t pool) override {
    return native_->getPoolUseCount(device, pool);
  }
  void createOrIncrefPool(c10::DeviceIndex device, c10::MempoolId_t pool,
                          std::shared_ptr<cca::CUDAAllocator> allocator) override {
    native_->createOrIncrefPool(device, pool, std::move(allocator));
  }
  void setUseOnOOM(c10::DeviceIndex device, c10::MempoolId_t pool, bool use_on_oom) override {
    native_->setUseOnOOM(device, pool, use_on_oom);
  }
  void setNoSplit(c10::DeviceIndex device, c10::MempoolId_t pool) override { native_->setNoSplit(device, pool); }
  bool checkPoolLiveAllocations(c10::DeviceIndex device, c10::MempoolId_t pool,
                                const std::unordered_set<void*>& expected) override {
    return native_->checkPoolLiveAllocations(device, pool, expected);
  }
  std::shared_ptr<cca::AllocatorState> getCheckpointState(c10::DeviceIndex device, c10::MempoolId_t pool) override {
    return native_->getCheckpointState(device, pool);
  }
  /// Native's, with the blocks it hands back under the bridge's raw deleter (with_raw_deleter).
  cca::CheckpointDelta setCheckpointPoolState(c10::DeviceIndex device,
                                              std::shared_ptr<cca::AllocatorState> state) override;
#if PHASEALLOC_TORCH_HAS_ALLOCATE_WITH_ADDRESS
  c10::DataPtr allocateWithAddress(std::size_t size, void* addr) override;
#endif

  // CUDAAllocator: IPC and peers
  cca::ShareableHandle shareIpcHandle(void* ptr) override;
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override { return native_->getIpcDevPtr(std::move(handle)); }
  /// Native's, and phasealloc's pages of `dev_to_access` mapped for `dev` (phasealloc_enable_peer_access).
  void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override;
  cudaError_t memcpyAsync(void* dst, int dst_device, const void* src, int src_device, std::size_t count,
                          cudaStream_t stream, bool p2p_enabled) override;

  std::string name() override { return "phasealloc"; }

  /// The listener phasealloc calls with every engine event (installed by the entry point).
  static void on_engine_event(const phasealloc_event* event, void* self) noexcept;

 private:
  void* engine_malloc(std::size_t bytes, c10::DeviceIndex device, cudaStream_t stream);
  void report_oom(c10::DeviceIndex device, std::size_t bytes, cudaStream_t stream, const std::string& message);
  /// Whether native caches at least `bytes` free on `device` (a MemPool(use_on_oom=True) may serve them).
  bool native_may_serve(c10::DeviceIndex device, std::size_t bytes);
  /// `native_call` (an allocation by native) within the memory cap, with the combined peak told after.
  template <class F>
  auto in_native(c10::DeviceIndex device, F&& native_call) -> decltype(native_call());
  /// `native_call` for a request the engine could not serve (engine_malloc returned nullptr); its
  /// out-of-memory error carries the engine's message.
  template <class F>
  auto after_oom_from_native(F&& native_call) -> decltype(native_call());
  /// After native allocated, freed or released cache: the combined peaks read native's allocated and
  /// reserved bytes (-1: every device).
  void native_changed(c10::DeviceIndex device);
  /// Frees native's cached free blocks (private pools included) so the engine can grow into them;
  /// false when nothing could be freed or a capture is under way (PyTorch frees nothing then).
  bool release_native_cache(c10::DeviceIndex device);
  /// A routed allocation, in native's pool, within the memory cap.
  c10::DataPtr native_pool_allocate(std::size_t bytes, c10::DeviceIndex device);

  cca::CUDAAllocator* native_;  ///< Never null; PyTorch never destroys its native allocator.
  pool_routes routes_;
  std::mutex hold_mutex_;  ///< Routes and the engine's hold change together (begin/endAllocateToPool).
  memory_cap cap_;
  combined_peak peaks_;
  memory_history history_;
  std::atomic<bool> initialized_{false};
  std::atomic<bool> enabled_{true};
  std::atomic<int> device_count_{0};

  /// Who holds the block at `ptr`: phasealloc's device, or -1 for native, including native's
  /// blocks inside a segment phasealloc lent to a MemPool built around the bridge (lent_).
  int engine_owner(const void* ptr);

  std::mutex raw_mutex_;
  std::unordered_map<void*, int> raw_owner_;  ///< raw_alloc pointers: device (engine) or -1 (native).
  /// Engine blocks native took through raw_alloc for a private pool's segments (a MemPool around
  /// the bridge, phasealloc.graph_pool()): start -> bytes. Native's blocks inside them are native's.
  std::map<std::uintptr_t, std::size_t> lent_;
  std::atomic<std::size_t> lent_count_{0};

  std::mutex observers_mutex_;
  std::vector<cca::OutOfMemoryObserver> oom_observers_;
};

}  // namespace phasealloc::c10_bridge
