// CUDA IPC export of a storage phasealloc holds: the storage moves to PyTorch's native allocator
// first, then PyTorch exports it as it exports any of its own blocks.
//
// Design note
// Rationale: sharing a CUDA tensor with another process (torch.multiprocessing, reduce_tensor:
//   verl's and OpenRLHF's IPC weight buckets to vLLM) exports a cudaIpcMemHandle or an
//   expandable segment's file descriptors in a format private to PyTorch's allocator, and the
//   receiver opens it with that allocator's code. Only memory PyTorch's allocator holds can be
//   exported faithfully.
// Approach: the package wraps UntypedStorage._share_cuda_ (every CUDA export goes through it);
//   for a storage whose block is phasealloc's it calls phasealloc_c10_rehome_storage first. That
//   allocates the same bytes from the native allocator, copies the contents device to device
//   after the device is idle, and swaps the storage's DataPtr in place, so every tensor viewing
//   the storage now uses the native block (tensors address memory through their storage) and
//   phasealloc's block is freed. PyTorch's own export then proceeds on a native block.
// Limitations: one device-to-device copy of the storage per storage exported (later exports of
//   it find it native already), and the device is synchronised around it; the exported bytes are
//   counted in the native allocator's books from then on.
#include <exception>
#include <string>

#include <c10/core/StorageImpl.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "bridge_allocator.hpp"

namespace {
thread_local std::string t_rehome_error;
}

/// NULL when `storage_impl` (a c10::StorageImpl*, Python's storage._cdata) is not phasealloc's or
/// was moved to the native allocator; else why it could not be moved (nothing changed then).
extern "C" __attribute__((visibility("default"))) const char* phasealloc_c10_rehome_storage(void* storage_impl) {
  using phasealloc::c10_bridge::bridge_allocator;
  try {
    auto* impl = static_cast<c10::StorageImpl*>(storage_impl);
    const c10::DataPtr& current = impl->data_ptr();
    if (!bridge_allocator::owns(current)) return nullptr;
    bridge_allocator* bridge = bridge_allocator::instance();
    if (bridge == nullptr) {
      t_rehome_error = "the c10 bridge is not installed";
      return t_rehome_error.c_str();
    }
    const c10::cuda::CUDAGuard guard(current.device().index());
    const std::size_t bytes = impl->nbytes();
    c10::DataPtr native = bridge->native_allocate(bytes);
    C10_CUDA_CHECK(cudaDeviceSynchronize());  // no kernel may still use the old block
    if (bytes != 0) C10_CUDA_CHECK(cudaMemcpy(native.get(), current.get(), bytes, cudaMemcpyDeviceToDevice));
    impl->set_data_ptr_noswap(std::move(native));  // frees phasealloc's block
    return nullptr;
  } catch (const std::exception& e) {
    t_rehome_error = e.what();
  } catch (...) {
    t_rehome_error = "unknown exception";
  }
  return t_rehome_error.c_str();
}
