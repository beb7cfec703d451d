#include "event_listener.hpp"

#include <atomic>
#include <new>
#include <optional>

namespace phasealloc::interpose {
namespace {

struct listener {
  phasealloc_event_fn fn = nullptr;
  void* context = nullptr;
};

std::atomic<const listener*> g_listener{nullptr};

std::optional<int> torch_action(trace_op op) noexcept {
  switch (op) {
    case trace_op::alloc: return PHASEALLOC_EVENT_ALLOC;
    case trace_op::free_requested: return PHASEALLOC_EVENT_FREE_REQUESTED;
    case trace_op::free_completed: return PHASEALLOC_EVENT_FREE_COMPLETED;
    case trace_op::segment_alloc: return PHASEALLOC_EVENT_SEGMENT_ALLOC;
    case trace_op::segment_free: return PHASEALLOC_EVENT_SEGMENT_FREE;
    case trace_op::segment_map: return PHASEALLOC_EVENT_SEGMENT_MAP;
    case trace_op::segment_unmap: return PHASEALLOC_EVENT_SEGMENT_UNMAP;
    // OOM is reported by the host itself: only it knows the device's free bytes at the failure.
    case trace_op::oom:
    case trace_op::phase_begin:
    case trace_op::phase_end:
    case trace_op::empty_cache:
    case trace_op::record_stream:
    case trace_op::offload:  // its reserved-bytes change comes as the segment_unmap / segment_map it makes
    case trace_op::restore: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

void set_event_listener(phasealloc_event_fn fn, void* context) noexcept {
  const listener* next = nullptr;
  if (fn != nullptr) {
    next = new (std::nothrow) listener{fn, context};
    if (next == nullptr) return;  // out of host memory: keep the previous listener
  }
  g_listener.store(next, std::memory_order_release);  // the previous one is leaked on purpose
}

bool event_listener_set() noexcept { return g_listener.load(std::memory_order_acquire) != nullptr; }

void notify_event_listener(int ordinal, const trace_record& record) noexcept {
  const listener* l = g_listener.load(std::memory_order_acquire);
  if (l == nullptr) return;
  const std::optional<int> action = torch_action(record.op);
  if (!action) return;
  const bool is_block = record.op == trace_op::alloc || record.op == trace_op::free_requested ||
                        record.op == trace_op::free_completed;
  phasealloc_event event{};
  event.device = ordinal;
  event.action = *action;
  event.addr = static_cast<std::size_t>(record.addr);
  // As PyTorch records them: a block's requested bytes (free_completed may only know the block's
  // size), a segment's bytes.
  event.size = is_block && record.requested_bytes != 0 ? record.requested_bytes : record.block_bytes;
  event.stream = reinterpret_cast<void*>(static_cast<std::uintptr_t>(record.stream));
  event.block_bytes = record.block_bytes;
  event.reserved_bytes = record.reserved_bytes;
  l->fn(&event, l->context);
}

}  // namespace phasealloc::interpose
