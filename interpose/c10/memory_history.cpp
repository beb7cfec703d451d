#include "memory_history.hpp"

#include <algorithm>

#include <c10/util/Exception.h>

namespace phasealloc::c10_bridge {
namespace {

thread_local context_ptr t_pending;

#if PHASEALLOC_TORCH_HAS_ANNOTATE_MEMORY
constexpr std::size_t action_count = static_cast<std::size_t>(TraceEntry::ANNOTATE) + 1;
#else
constexpr std::size_t action_count = static_cast<std::size_t>(TraceEntry::OOM) + 1;
#endif

TraceEntry::Action to_action(int action) {
  switch (action) {
    case PHASEALLOC_EVENT_ALLOC: return TraceEntry::ALLOC;
    case PHASEALLOC_EVENT_FREE_REQUESTED: return TraceEntry::FREE_REQUESTED;
    case PHASEALLOC_EVENT_FREE_COMPLETED: return TraceEntry::FREE_COMPLETED;
    case PHASEALLOC_EVENT_SEGMENT_ALLOC: return TraceEntry::SEGMENT_ALLOC;
    case PHASEALLOC_EVENT_SEGMENT_FREE: return TraceEntry::SEGMENT_FREE;
    case PHASEALLOC_EVENT_SEGMENT_MAP: return TraceEntry::SEGMENT_MAP;
    case PHASEALLOC_EVENT_SEGMENT_UNMAP: return TraceEntry::SEGMENT_UNMAP;
    default: return TraceEntry::OOM;
  }
}

}  // namespace

memory_history::pending_guard::pending_guard(context_ptr context) { t_pending = std::move(context); }
memory_history::pending_guard::~pending_guard() { t_pending.reset(); }

void memory_history::configure(bool enabled, CreateContextFn recorder, std::size_t max_entries, RecordContext when,
                               bool clear, const std::vector<std::string>& skip_actions) {
  TORCH_CHECK(when == RecordContext::NEVER || recorder != nullptr,
              "phasealloc: recording stack frames needs a context recorder");
  std::vector<bool> skip(action_count, false);
  for (const std::string& name : skip_actions) {
    skip[static_cast<std::size_t>(c10::CachingDeviceAllocator::parseTraceEntryAction(name))] = true;
  }
  std::lock_guard lock(mutex_);
  enabled_ = enabled;
  recorder_ = recorder;
  when_ = when;
  max_entries_ = max_entries;
  skip_ = std::move(skip);
  if (clear || !enabled) rings_.clear();  // as PyTorch's: off, or clear, empties the history
  if (clear || !enabled) live_contexts_.clear();
  if (!enabled) compile_contexts_.clear();
  active_.store(enabled_ || !trackers_.empty(), std::memory_order_relaxed);
  gathering_.store(enabled_ && when_ != RecordContext::NEVER, std::memory_order_relaxed);
}

bool memory_history::enabled() const {
  std::lock_guard lock(mutex_);
  return enabled_;
}

context_ptr memory_history::gather_for_alloc() const {
  if (!gathering_.load(std::memory_order_relaxed)) return nullptr;
  CreateContextFn recorder = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!enabled_ || when_ == RecordContext::NEVER) return nullptr;
    recorder = recorder_;
  }
  return recorder != nullptr ? recorder() : nullptr;  // outside the lock: it may take the GIL
}

context_ptr memory_history::gather_for_free() const {
  if (!gathering_.load(std::memory_order_relaxed)) return nullptr;
  CreateContextFn recorder = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!enabled_ || when_ != RecordContext::ALL) return nullptr;
    recorder = recorder_;
  }
  return recorder != nullptr ? recorder() : nullptr;
}

TraceEntry memory_history::make_entry_locked(TraceEntry::Action action, c10::DeviceIndex device, std::size_t addr,
                                             std::size_t size, void* stream, context_ptr context) const {
  return TraceEntry(action, device, addr, size, stream, c10::MempoolId_t{0, 0}, c10::getApproximateTime(),
                    std::move(context), compile_contexts_.empty() ? "N/A" : compile_contexts_.back(), user_metadata_);
}

void memory_history::push_locked(TraceEntry entry) {
  for (const auto& tracker : trackers_) tracker(entry);
  if (!enabled_ || max_entries_ == 0 || skip_[static_cast<std::size_t>(entry.action_)]) return;
  ring& r = rings_[entry.device_];
  if (r.entries.size() < max_entries_) {
    r.entries.push_back(std::move(entry));
  } else {
    r.entries[r.next] = std::move(entry);
    r.next = (r.next + 1) % max_entries_;
  }
}

void memory_history::on_event(const phasealloc_event& event) noexcept {
  if (!active_.load(std::memory_order_relaxed)) return;
  try {
    const TraceEntry::Action action = to_action(event.action);
    std::lock_guard lock(mutex_);
    if (!enabled_ && trackers_.empty()) return;
    // The caller's context belongs to what it asked for and the segments that request caused.
    const bool caused_by_caller = action != TraceEntry::FREE_COMPLETED;
    context_ptr context = caused_by_caller ? t_pending : nullptr;
    if (enabled_ && when_ != RecordContext::NEVER) {
      if (action == TraceEntry::ALLOC) live_contexts_[event.addr] = context;
      if (action == TraceEntry::FREE_COMPLETED) live_contexts_.erase(event.addr);
    }
    if (enabled_ && action == TraceEntry::FREE_REQUESTED) freed_requested_[event.addr] = event.size;
    if (enabled_ && action == TraceEntry::ALLOC) freed_requested_.erase(event.addr);
    // STATE keeps stacks for live blocks only, not in the history.
    if (when_ == RecordContext::STATE) context = nullptr;
    push_locked(make_entry_locked(action, static_cast<c10::DeviceIndex>(event.device), event.addr, event.size,
                                  event.stream, std::move(context)));
  } catch (...) {
    // Out of host memory: the entry is lost, the allocation is not.
  }
}

void memory_history::on_oom(c10::DeviceIndex device, std::size_t free_bytes, std::size_t requested_bytes,
                            void* stream) {
  if (!active_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(mutex_);
  if (!enabled_ && trackers_.empty()) return;
  push_locked(make_entry_locked(TraceEntry::OOM, device, free_bytes, requested_bytes, stream,
                                when_ == RecordContext::STATE ? nullptr : t_pending));
}

#if PHASEALLOC_TORCH_HAS_ANNOTATE_MEMORY
void memory_history::annotate(c10::DeviceIndex device, std::size_t addr, const std::string& metadata) {
  std::lock_guard lock(mutex_);
  if (!enabled_ && trackers_.empty()) return;
  TraceEntry entry = make_entry_locked(TraceEntry::ANNOTATE, device, addr, 0, nullptr, nullptr);
  entry.user_metadata_ = metadata;
  push_locked(std::move(entry));
}
#endif

void memory_history::set_user_metadata(const std::string& metadata) {
  std::lock_guard lock(mutex_);
  user_metadata_ = metadata;
}

std::string memory_history::user_metadata() const {
  std::lock_guard lock(mutex_);
  return user_metadata_;
}

void memory_history::push_compile_context(const std::string& context) {
  std::lock_guard lock(mutex_);
  if (enabled_) compile_contexts_.push_back(context);  // as PyTorch's: only while recording
}

void memory_history::pop_compile_context() {
  std::lock_guard lock(mutex_);
  if (!compile_contexts_.empty()) compile_contexts_.pop_back();
}

std::vector<TraceEntry> memory_history::entries(c10::DeviceIndex device) const {
  std::vector<TraceEntry> out;
  std::lock_guard lock(mutex_);
  const auto it = rings_.find(device);
  if (it == rings_.end()) return out;
  const ring& r = it->second;
  out.reserve(r.entries.size());
  out.insert(out.end(), r.entries.begin() + static_cast<std::ptrdiff_t>(r.next), r.entries.end());
  out.insert(out.end(), r.entries.begin(), r.entries.begin() + static_cast<std::ptrdiff_t>(r.next));
  auto to_ns = clock_.makeConverter();
  for (TraceEntry& e : out) e.time_.t_ = to_ns(e.time_.approx_t_) / 1000;
  return out;
}

std::size_t memory_history::freed_requested_bytes(std::size_t addr) const {
  std::lock_guard lock(mutex_);
  const auto it = freed_requested_.find(addr);
  return it != freed_requested_.end() ? it->second : 0;
}

context_ptr memory_history::block_context(std::size_t addr) const {
  std::lock_guard lock(mutex_);
  const auto it = live_contexts_.find(addr);
  return it != live_contexts_.end() ? it->second : nullptr;
}

void memory_history::attach_tracker(c10::CachingDeviceAllocator::AllocatorTraceTracker tracker) {
  std::lock_guard lock(mutex_);
  trackers_.push_back(std::move(tracker));
  active_.store(true, std::memory_order_relaxed);
}

}  // namespace phasealloc::c10_bridge
