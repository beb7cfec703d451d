// PyTorch's allocator settings changed at run time (torch.cuda.memory._set_allocator_settings,
// c10::CachingAllocator::setAllocatorSettings) reach phasealloc: roundup_power2_divisions.
//
// Design note
// Rationale: a job that sets roundup_power2_divisions at run time asks in its code for PyTorch's
//   block sizes; PyTorch's own test_allocator_settings checks them. Native's private pools follow the
//   setting by themselves; phasealloc's engines know nothing of it.
// Approach: PyTorch calls one device parser hook after it parsed the common keys of new settings
//   (a bad one raises ValueError before). The bridge puts its own hook in front of CUDA's: it calls
//   CUDA's, then hands the division table PyTorch now holds to phasealloc_set_request_divisions
//   (interpose/src/request_rounding.hpp), which rounds phasealloc's requests by it. Settings without
//   the key leave PyTorch's table at its default of zeros, which turns the rounding off again, as in
//   PyTorch. Settings PyTorch refuses in its common keys have reset its divisions all the same, with
//   no hook called: the package's wrapper of _set_allocator_settings then calls
//   phasealloc_c10_follow_allocator_settings.
// Limitations: only settings made after the bridge is installed; a refused direct call of
//   torch._C._accelerator_setAllocatorSettings is seen at the next accepted one.
//   PYTORCH_CUDA_ALLOC_CONF at start shapes native's pools only (interpose/README.md). The other
//   run-time keys (max_split_size_mb, garbage_collection_threshold, expandable_segments) shape
//   native's pools only; phasealloc's policy decides those for its own memory.
#pragma once

namespace phasealloc::c10_bridge {

/// Installs the hook; once per process (a second call does nothing).
void follow_runtime_settings();
/// PyTorch's division table as it is now, to phasealloc_set_request_divisions (throws c10::Error).
void hand_divisions_to_phasealloc();

}  // namespace phasealloc::c10_bridge
