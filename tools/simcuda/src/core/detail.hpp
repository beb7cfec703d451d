// Private to the core: counters the other core files bump.
#pragma once

#include <cstddef>

namespace simcuda::detail {
void count_device_malloc() noexcept;
void count_device_free() noexcept;
void count_vmm_create() noexcept;
void count_vmm_map() noexcept;
void count_vmm_unmap() noexcept;
void count_out_of_memory() noexcept;
}  // namespace simcuda::detail

#include <cstdint>
namespace simcuda::detail {
/// Whether a faulting address lies in a device arena (signal-safe: no locks).
bool fault_in_arena(std::uintptr_t address, int* device) noexcept;
}  // namespace simcuda::detail

namespace simcuda {
struct event;
namespace detail {
/// An event is gone (destroy_event): its stream-capture marker goes too (capture.cpp).
void forget_event(const event* e) noexcept;
}  // namespace detail
}  // namespace simcuda
