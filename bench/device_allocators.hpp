// The allocators PyTorch itself calls, on a CUDA device (the simulated GPU in CI): the anchor the
// engine's speed is measured against (phasealloc_torch_bench only).
//
//   torch_caching_allocator  PyTorch's own c10::cuda::CUDACachingAllocator, from the wheel's
//                            libc10_cuda.so: raw_alloc_with_stream / raw_delete, the calls a
//                            tensor's allocation and free make (minus the DataPtr). Its
//                            configuration is PYTORCH_CUDA_ALLOC_CONF, read when the library loads.
//   c_entry_allocator        phasealloc's C entry point (phasealloc_malloc / phasealloc_free of
//                            libphasealloc_torch.so, what CUDAPluggableAllocator calls) on the CUDA
//                            device, with the policy of its spec.
//
// Design note
// Rationale: the engine rows of phasealloc_bench run on a model device with zero call cost, and the
//   `pytorch` rows are our model of PyTorch, not PyTorch. Only the real allocator, paying the same
//   device calls as ours, says whether phasealloc is cheaper where users run it.
// Approach: both adaptors have the duck-typed interface of alloc_patterns.hpp (allocate,
//   deallocate, set_phase, reset, mark, books, label), so every pattern runs on them unchanged.
//   reset() empties the cache (a process has one allocator of each: a fresh one per benchmark is
//   not possible); books() reads the allocators' own statistics (getDeviceStats, the C API's stats
//   JSON). Stream 0 is the default stream; others are created on first use.
// Limitations: no record_stream (it needs the DataPtr that raw_alloc does not make): a pattern that
//   uses it is reported as an error row. One configuration of each per process: the C entry point
//   reads its policy once, and PyTorch its PYTORCH_CUDA_ALLOC_CONF at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "alloc_books.hpp"
#include "phasealloc/types.hpp"

namespace phasealloc::bench {

/// The CUDA stream of ordinal `stream` on device 0: nullptr (the default stream) for 0, else one
/// created on first use and kept for the process. Throws std::runtime_error if CUDA refuses.
void* cuda_stream_for(stream_id stream);

class torch_caching_allocator {
 public:
  /// nullptr and `error` set when there is no CUDA device or the allocator does not initialise.
  static std::unique_ptr<torch_caching_allocator> make(std::string& error);

  std::uintptr_t allocate(std::size_t bytes, stream_id stream = 0, std::uint32_t tag = 0);
  void deallocate(std::uintptr_t addr, std::size_t bytes);
  void record_stream(std::uintptr_t addr, stream_id stream);
  void set_phase(std::string_view /*name*/) {}  // PyTorch's allocator has no phases
  void reset();
  void mark();
  std::uint64_t device_calls_since_mark() const;
  alloc_books books() const;
  std::string label() const;

  ~torch_caching_allocator();

 private:
  torch_caching_allocator() = default;
  void clear();  ///< Empties the cache and resets the peaks, without folding them into the books.
  void note_failure(std::string message);

  std::size_t folded_peak_reserved_ = 0;
  std::size_t folded_peak_allocated_ = 0;
  std::uint64_t mark_calls_ = 0;
  std::uint64_t failures_ = 0;
  std::string first_failure_;
};

class c_entry_allocator {
 public:
  /// `spec`: the policy (PHASEALLOC_CONF grammar). nullptr and `error` set when the C entry point
  /// refuses it (a bad spec, or a process already configured with another one).
  static std::unique_ptr<c_entry_allocator> make(std::string_view spec, std::string& error);

  std::uintptr_t allocate(std::size_t bytes, stream_id stream = 0, std::uint32_t tag = 0);
  void deallocate(std::uintptr_t addr, std::size_t bytes);
  void record_stream(std::uintptr_t addr, stream_id stream);
  void set_phase(std::string_view name);
  void reset();
  void mark();
  std::uint64_t device_calls_since_mark() const;
  alloc_books books() const;
  std::string label() const;

  ~c_entry_allocator();

 private:
  c_entry_allocator() = default;
  void clear();  ///< Empties the cache and resets the peaks, without folding them into the books.
  void note_failure(std::string message);

  std::string spec_;
  std::size_t folded_peak_reserved_ = 0;
  std::size_t folded_peak_allocated_ = 0;
  std::uint64_t mark_calls_ = 0;
  std::uint64_t failures_ = 0;
  std::string first_failure_;
};

}  // namespace phasealloc::bench
