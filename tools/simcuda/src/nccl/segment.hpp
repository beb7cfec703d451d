// The shared memory of one communicator: a POSIX shared-memory object every rank maps, holding the
// rendezvous state, a futex barrier, the collectives' staging slots and the point-to-point
// mailboxes (Note [simulated NCCL] in README.md beside this file).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl_types.hpp"

namespace simcuda::nccl {

inline constexpr int max_ranks = 64;
/// Bytes each rank stages per step of a collective (two banks of it per rank).
inline constexpr std::size_t slot_bytes = std::size_t{1} << 20;
/// Bytes of the ring buffer of each ordered pair of ranks, for send/recv.
inline constexpr std::size_t mailbox_bytes = std::size_t{512} << 10;

struct mailbox {
  std::atomic<std::uint64_t> produced;  ///< bytes the sender has written in total
  std::atomic<std::uint64_t> consumed;  ///< bytes the receiver has read in total
};

struct segment_header {
  std::atomic<std::int32_t> nranks;
  std::atomic<std::uint32_t> joined;  ///< ranks arrived (futex word)
  std::atomic<std::uint32_t> barrier_arrived;
  std::atomic<std::uint32_t> barrier_generation;   ///< futex word
  std::atomic<std::int32_t> aborted_by;            ///< rank + 1 of an ncclCommAbort, 0 when none
  std::atomic<std::uint32_t> doorbell[max_ranks];  ///< bumped when a peer moved a mailbox of the rank
  std::atomic<std::int32_t> pid[max_ranks];
  std::int32_t device[max_ranks];
  std::int32_t split_color[max_ranks];
  std::int32_t split_key[max_ranks];
};

/// One rank's view of a communicator's shared memory.
class segment {
 public:
  segment() = default;
  segment(const segment&) = delete;
  segment& operator=(const segment&) = delete;
  ~segment();

  /// Creates or opens the object `name`, sized for `nranks`, and joins it as `rank` on `device` (the
  /// machine GPU, which CUDA_VISIBLE_DEVICES does not renumber):
  /// waits until every rank has joined, then removes the name (the mappings keep the memory).
  ncclResult_t join(const std::string& name, int nranks, int rank, int device, const char* function);

  /// Every rank of the communicator arrives before any leaves. Fails with ncclRemoteError when a
  /// peer aborted the communicator or its process exited.
  ncclResult_t barrier(const char* function);

  /// Marks the communicator aborted for every rank (their waits fail).
  void abort() noexcept;

  /// Staging slot `bank` (0 or 1) of `rank`.
  char* slot(int rank, int bank) const noexcept;
  mailbox& box(int from, int to) const noexcept;
  char* box_data(int from, int to) const noexcept;
  segment_header& header() const noexcept { return *header_; }

  /// Wakes `rank`'s waits on its doorbell.
  void ring(int rank) noexcept;
  /// Waits (at most ~2 ms) for the doorbell of this rank to move past `seen`; fails with
  /// ncclRemoteError when a peer aborted the communicator. Which exited peer matters is the
  /// caller's to judge (peer_gone): one that finished its part may leave.
  ncclResult_t wait_doorbell(std::uint32_t seen, const char* function);

  /// Whether `rank`'s process has exited (or is a zombie).
  bool peer_gone(int rank) const;

  int rank() const noexcept { return rank_; }
  int nranks() const noexcept { return nranks_; }

 private:
  /// The barrier's and the rendezvous's check: an abort, or any peer gone (every peer is needed),
  /// unless `finished()`, read again after the finding, says the wait is over (a peer that was the
  /// last to arrive may have gone on and exited in between).
  template <typename Finished>
  ncclResult_t check_peers(const char* function, Finished finished);
  ncclResult_t check_aborted(const char* function);

  segment_header* header_ = nullptr;
  char* base_ = nullptr;
  std::size_t bytes_ = 0;
  int rank_ = 0;
  int nranks_ = 0;
};

}  // namespace simcuda::nccl
