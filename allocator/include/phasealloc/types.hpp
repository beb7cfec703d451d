// phasealloc core types.
//
// Glossary (read this first; every other file uses these words in these senses)
// ---------------------------------------------------------------------------
// device   : where bytes come from (model, cuda_runtime, cuda_vmm). It reserves address space,
//            maps and unmaps physical memory at its granularity, and records stream events.
//            Contract in device.hpp.
// segment  : one contiguous range of device address space the engine reserved. On a device
//            without virtual reserve (cudaMalloc) it is wholly mapped for its whole life; on a
//            VMM device its granules may be mapped or unmapped independently.
// block    : a piece of a segment. Exactly one of: allocated (handed to a caller), free (cached
//            in a pool, mapped), unmapped (address space with no memory behind it, VMM only).
//            The blocks of a segment tile it exactly, in address order.
// pool     : the set of free blocks that serve one kind of request. The policy names the pools
//            (small/large, size classes, phases) and picks one per request.
// stream   : an opaque stream handle. For CUDA devices it is the cudaStream_t value; in traces
//            and on the model device it is a small ordinal. 0 is the default stream.
// event    : a marker recorded on a stream. A block freed while other streams used it returns
//            to its pool only after their events complete ("pending free").
// phase    : a named part of the job: generation, inference, training, optimizer, or any
//            user name. Stats are kept per phase; policies act at transitions.
// interval : one stretch of a phase between two transitions (a job enters a phase once per step:
//            one interval each time). Per-phase peaks are over all its intervals.
// floor    : the peak of live requested bytes over a run, below which no allocator can go.
// offload  : a range's memory moved to host memory mapped at the same device addresses (or, on a
//            driver that cannot map host memory there, unmapped until restored); restore brings it
//            back. Same addresses: pointers, views and graphs stay valid. Not "release" (which
//            gives back free cached memory).
// policy   : the decisions: rounding, pool choice, segment size, split, what to release at a
//            transition or an out-of-memory. Contract in policy.hpp.
// tag      : a number an allocation carries (0: none). Named tags (a job's phasealloc.tag("name"))
//            start at named_tag_base; lower ones are a trace's own categories.
// model    : the model device (devices/model_device.hpp): host-only books of a GPU's memory that
//            the replay, tune and the tests run the engine on; `--engine model` in the CLI means
//            "phasealloc's engine on the model device". Not "the simulated GPU": that is simcuda
//            (tools/simcuda), which runs unmodified CUDA programs. "The pytorch model" is the
//            `pytorch` policy (PyTorch's allocator's decisions) on the engine and the model device:
//            the replay's exact model of PyTorch's allocator.
//
// Units are in names: *_bytes are byte counts (std::size_t), *_ns nanoseconds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace phasealloc {

using device_address = std::uintptr_t;  ///< An address in the device's address space.
using stream_id = std::uint64_t;        ///< Opaque stream handle; 0 is the default stream.
using event_id = std::uint64_t;         ///< Opaque event handle owned by a device.
using pool_id = std::uint32_t;          ///< Index into the policy's pool table.
using phase_id = std::uint32_t;         ///< Index into the engine's phase table.

inline constexpr std::size_t kib = std::size_t{1} << 10;
inline constexpr std::size_t mib = std::size_t{1} << 20;
inline constexpr std::size_t gib = std::size_t{1} << 30;

/// Allocation tags (allocate's `tag`): 0 is none. Tags a job names (phasealloc.tag("adam") in
/// Python, phasealloc_tag_id in C) are numbered from named_tag_base up; lower tags are categories a
/// trace may carry (synthetic traces tag every allocation by kind). A policy may give named tags
/// regions of their own (the phasealloc policy does).
inline constexpr std::uint32_t named_tag_base = std::uint32_t{1} << 20;

/// Phase 0 always exists: the time before any phase was set.
inline constexpr phase_id unphased = 0;

/// Rounds `bytes` up to a multiple of `alignment` (a power of two or any positive value).
constexpr std::size_t round_up(std::size_t bytes, std::size_t alignment) noexcept {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace phasealloc
