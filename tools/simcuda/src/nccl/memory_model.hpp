// NCCL's own device memory, modelled: the buffers a communicator's connections hold, taken from the
// simulated device outside any framework's allocator, so cudaMemGetInfo and the device's books
// show them (Note [NCCL memory model] in README.md beside this file).
#pragma once

#include <cstddef>
#include <vector>

namespace simcuda::nccl {

/// The sizing NCCL uses, from its environment variables (read once).
struct buffer_sizing {
  std::size_t simple_bytes = std::size_t{4} << 20;       ///< NCCL_BUFFSIZE
  std::size_t ll_bytes = 8 * 512 * 8 * 16;               ///< NCCL_LL_BUFFSIZE: lines/thread x threads x steps x 16 B
  std::size_t ll128_bytes = 120 * 640 * 8 * 8;           ///< NCCL_LL128_BUFFSIZE: elems/thread x threads x steps x 8 B
  int channels = 16;                                     ///< NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS
  int p2p_channels_per_peer = 2;                         ///< NCCL_NCHANNELS_PER_PEER
  std::size_t p2p_chunk_bytes = std::size_t{512} << 10;  ///< NCCL_P2P_NVL_CHUNKSIZE
  bool runtime_connect = true;                           ///< NCCL_RUNTIME_CONNECT (0: connect at init)

  /// One collective connection: the receive buffers of the three protocols.
  std::size_t ring_connection_bytes() const noexcept { return simple_bytes + ll_bytes + ll128_bytes; }
  /// One point-to-point receive connection: NCCL_STEPS (8) chunks.
  std::size_t p2p_connection_bytes() const noexcept { return p2p_chunk_bytes * 8; }
};

/// The sizing of this process, from NCCL_* (a malformed value keeps the default, with a line).
const buffer_sizing& sizing();

/// The device memory of one communicator.
class comm_memory {
 public:
  comm_memory(int device, int nranks) : device_(device), nranks_(nranks) {}
  comm_memory(const comm_memory&) = delete;
  comm_memory& operator=(const comm_memory&) = delete;
  ~comm_memory() { release(); }

  /// The collective (ring) connections, once: at init, or at the first collective under runtime
  /// connect. False when the device is out of memory.
  bool connect_ring();
  /// The point-to-point connection receiving from `peer`, once.
  bool connect_p2p_receive(int peer);

  /// ncclCommSuspend: gives every buffer back, remembering what was connected; resume() takes them
  /// again. False (nothing taken) when the device is out of memory.
  void suspend();
  bool resume();
  bool suspended() const noexcept { return suspended_; }

  /// Bytes of device memory held now (the allocations' rounded sizes).
  std::size_t held_bytes() const noexcept;
  /// Bytes the connections hold when not suspended.
  std::size_t connected_bytes() const noexcept { return connected_bytes_; }

 private:
  struct allocation {
    void* pointer;
    std::size_t bytes;
  };
  bool take(std::size_t bytes, int count);
  void release() noexcept;

  int device_;
  int nranks_;
  bool ring_connected_ = false;
  std::vector<bool> p2p_receive_connected_ = std::vector<bool>(static_cast<std::size_t>(nranks_), false);
  bool suspended_ = false;
  std::vector<allocation> allocations_;
  std::size_t connected_bytes_ = 0;  ///< what the connections take (kept across a suspend)
};

}  // namespace simcuda::nccl
