// cuda_runtime_device: cudaMalloc / cudaFree segments and runtime events.
//
// Every CUDA call is made with the device current (runtime_device_guard) and every failure
// clears the runtime's last error (cudaGetLastError), as rmm's RMM_CUDA_TRY does: a later,
// unrelated cudaGetLastError() in PyTorch must not see our out-of-memory. One mutex guards the
// segment books and is held across cudaMalloc/cudaFree, so the books always match what the
// runtime holds (the engine serialises its calls anyway). Event calls and synchronize() run
// outside it: a wait must not block another engine that shares the device.
//
// Limitations: a segment is memory for its whole life (no partial release: that is what the VMM
// device is for); cudaFree synchronizes the device, so release() is slow and stalls every stream;
// capacity_bytes includes what the CUDA context and other processes hold, so free_bytes() starts
// below it.
#include "phasealloc/devices/cuda_runtime_device.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include "cuda_runtime_util.hpp"

namespace phasealloc {

namespace {

/// Granularity when the texture-alignment attribute cannot be read: what every GPU since Fermi reports.
constexpr std::size_t fallback_granularity_bytes = 512;
/// The CUDA programming guide's guarantee for any pointer cudaMalloc returns.
constexpr std::size_t min_granularity_bytes = 256;

cudaStream_t to_cuda_stream(stream_id stream) noexcept { return reinterpret_cast<cudaStream_t>(stream); }

device_caps query_caps(int ordinal) noexcept {
  device_caps caps;
  caps.has_virtual_reserve = false;
  caps.has_partial_unmap = false;
  caps.granularity_bytes = fallback_granularity_bytes;
  int alignment = 0;
  if (cudaDeviceGetAttribute(&alignment, cudaDevAttrTextureAlignment, ordinal) == cudaSuccess && alignment > 0) {
    caps.granularity_bytes = std::max(static_cast<std::size_t>(alignment), min_granularity_bytes);
  } else {
    (void)cudaGetLastError();
  }
  detail::runtime_device_guard guard(ordinal);
  std::size_t free = 0;
  std::size_t total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
    caps.capacity_bytes = total;
  } else {
    (void)cudaGetLastError();
  }
  return caps;
}

}  // namespace

struct cuda_runtime_device::state {
  std::mutex mutex;                                   ///< Guards the books below.
  std::map<device_address, std::size_t> segments;     ///< base -> bytes of every live cudaMalloc
  std::unordered_map<event_id, cudaEvent_t> events;   ///< id -> live event
  event_id next_event = 1;

  mutable std::mutex failure_mutex;  ///< Guards last_failure only, so waits need not hold `mutex`.
  std::string last_failure;

  /// Records a failed call, clears the sticky error and maps it to an errc.
  errc failed(cudaError_t e, std::string_view call) {
    (void)cudaGetLastError();
    std::lock_guard lock(failure_mutex);
    last_failure = fmt::format("{} failed: {}", call, detail::describe_cuda_error(e));
    return e == cudaErrorMemoryAllocation ? errc::out_of_memory : errc::device_refused;
  }
  /// The live event named `id`, or nullptr. Event calls run outside `mutex` (a wait must not block
  /// other engines sharing the device); destroying an event while using it is the caller's bug.
  cudaEvent_t find_event(event_id id) {
    std::lock_guard lock(mutex);
    const auto it = events.find(id);
    return it == events.end() ? nullptr : it->second;
  }
};

result<std::unique_ptr<cuda_runtime_device>> cuda_runtime_device::create(int ordinal, std::string* why) noexcept {
  if (const errc e = detail::probe_cuda_device(ordinal, why); e != errc::ok) return e;
  {
    detail::runtime_device_guard guard(ordinal);
    std::size_t free = 0;
    std::size_t total = 0;
    const cudaError_t e = guard.ok() ? cudaMemGetInfo(&free, &total) : cudaErrorInvalidDevice;
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (why) *why = fmt::format("CUDA device {} unusable: cudaMemGetInfo returned {}", ordinal, detail::describe_cuda_error(e));
      return errc::device_refused;
    }
  }
  return std::make_unique<cuda_runtime_device>(ordinal);
}

cuda_runtime_device::cuda_runtime_device(int ordinal) noexcept
    : ordinal_(ordinal), caps_(query_caps(ordinal)), state_(std::make_unique<state>()) {}

cuda_runtime_device::~cuda_runtime_device() {
  std::lock_guard lock(state_->mutex);
  detail::runtime_device_guard guard(ordinal_);
  for (const auto& [id, event] : state_->events) (void)cudaEventDestroy(event);
  for (const auto& [base, bytes] : state_->segments) (void)cudaFree(reinterpret_cast<void*>(base));
  (void)cudaGetLastError();
}

std::string cuda_runtime_device::last_failure() const {
  std::lock_guard lock(state_->failure_mutex);
  return state_->last_failure;
}

// --- address space and memory -------------------------------------------------------------------

result<device_address> cuda_runtime_device::reserve(std::size_t bytes) noexcept {
  if (bytes == 0 || bytes % caps_.granularity_bytes != 0) return errc::invalid_argument;
  std::lock_guard lock(state_->mutex);
  detail::runtime_device_guard guard(ordinal_);
  void* ptr = nullptr;
  const cudaError_t e = cudaMalloc(&ptr, bytes);
  if (e != cudaSuccess) return state_->failed(e, fmt::format("cudaMalloc({})", bytes));
  const auto base = reinterpret_cast<device_address>(ptr);
  if (base % caps_.granularity_bytes != 0) {
    // Never seen; the contract promises granule-aligned bases, so refuse rather than lie.
    (void)cudaFree(ptr);
    (void)cudaGetLastError();
    std::lock_guard failure_lock(state_->failure_mutex);
    state_->last_failure = fmt::format("cudaMalloc({}) returned {:#x}, not aligned to {} bytes", bytes, base,
                                       caps_.granularity_bytes);
    return errc::device_refused;
  }
  state_->segments.emplace(base, bytes);
  return base;
}

errc cuda_runtime_device::release(device_address base, std::size_t bytes) noexcept {
  std::lock_guard lock(state_->mutex);
  const auto it = state_->segments.find(base);
  if (it == state_->segments.end() || it->second != bytes) return errc::invalid_argument;
  detail::runtime_device_guard guard(ordinal_);
  const cudaError_t e = cudaFree(reinterpret_cast<void*>(base));
  if (e != cudaSuccess) return state_->failed(e, fmt::format("cudaFree({:#x})", base));
  state_->segments.erase(it);
  return errc::ok;
}

errc cuda_runtime_device::map(device_address, std::size_t) noexcept { return errc::not_supported; }
errc cuda_runtime_device::unmap(device_address, std::size_t) noexcept { return errc::not_supported; }

std::size_t cuda_runtime_device::free_bytes() const noexcept {
  detail::runtime_device_guard guard(ordinal_);
  std::size_t free = 0;
  std::size_t total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return free;
}

// --- streams and events -------------------------------------------------------------------------

result<event_id> cuda_runtime_device::create_event() noexcept {
  detail::runtime_device_guard guard(ordinal_);
  cudaEvent_t event = nullptr;
  const cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (e != cudaSuccess) return state_->failed(e, "cudaEventCreateWithFlags(cudaEventDisableTiming)");
  std::lock_guard lock(state_->mutex);
  const event_id id = state_->next_event++;
  state_->events.emplace(id, event);
  return id;
}

errc cuda_runtime_device::record_event(event_id event, stream_id stream) noexcept {
  cudaEvent_t ev = state_->find_event(event);
  if (ev == nullptr) return errc::invalid_argument;
  const cudaError_t e = cudaEventRecord(ev, to_cuda_stream(stream));
  if (e != cudaSuccess) return state_->failed(e, fmt::format("cudaEventRecord(stream {:#x})", stream));
  return errc::ok;
}

result<bool> cuda_runtime_device::query_event(event_id event) noexcept {
  cudaEvent_t ev = state_->find_event(event);
  if (ev == nullptr) return errc::invalid_argument;
  const cudaError_t e = cudaEventQuery(ev);
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error, but it must not linger as the last error
    return false;
  }
  return state_->failed(e, "cudaEventQuery");
}

errc cuda_runtime_device::synchronize_event(event_id event) noexcept {
  cudaEvent_t ev = state_->find_event(event);
  if (ev == nullptr) return errc::invalid_argument;
  const cudaError_t e = cudaEventSynchronize(ev);
  if (e != cudaSuccess) return state_->failed(e, "cudaEventSynchronize");
  return errc::ok;
}

void cuda_runtime_device::destroy_event(event_id event) noexcept {
  cudaEvent_t ev = nullptr;
  {
    std::lock_guard lock(state_->mutex);
    const auto it = state_->events.find(event);
    if (it == state_->events.end()) return;
    ev = it->second;
    state_->events.erase(it);
  }
  const cudaError_t e = cudaEventDestroy(ev);
  if (e != cudaSuccess) (void)state_->failed(e, "cudaEventDestroy");
}

errc cuda_runtime_device::synchronize() noexcept {
  detail::runtime_device_guard guard(ordinal_);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return state_->failed(e, "cudaDeviceSynchronize");
  return errc::ok;
}

}  // namespace phasealloc
