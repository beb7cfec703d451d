// One queued NCCL operation, and the engines that run them: the collectives through the staging
// slots, point-to-point through the mailboxes. An operation runs at its call, or at the
// ncclGroupEnd that closes the group it was issued in.
#pragma once

#include <cstddef>
#include <vector>

#include "communicator.hpp"
#include "reduce.hpp"
#include "simcuda/core.hpp"

namespace simcuda::nccl {

enum class op_kind {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  all_to_all,
  gather,
  scatter,
  send,
  recv
};

struct operation {
  op_kind kind = op_kind::all_reduce;
  const char* function = "";
  ncclComm* comm = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  ///< elements, as the API names them (per rank where NCCL says so)
  ncclDataType_t type = ncclInt8;
  ncclRedOp_t op = ncclSum;
  int peer = 0;            ///< root of a rooted collective, peer of send/recv
  void* stream = nullptr;  ///< the cudaStream_t it is ordered on
};

inline bool is_p2p(op_kind kind) { return kind == op_kind::send || kind == op_kind::recv; }

/// The simulator's stream `op` is issued on (its handle read for the communicator's device), or
/// nullptr when the handle is not a live stream.
stream* stream_of(const operation& op);

/// Checks an operation's arguments (communicator, type, operator, root/peer, buffers, stream).
ncclResult_t validate(const operation& op);

/// The work of `op` enters its stream: refused while the stream captures (NCCL kernels in a CUDA
/// graph are not simulated), else one tick of the stream clock. Work runs at the call, so it is
/// ordered on its stream and an event recorded after it completes as the event mode says.
ncclResult_t enter_stream(const operation& op);

/// Runs a validated collective on its communicator (every rank runs the same one).
ncclResult_t run_collective(const operation& op);

/// Runs validated send/recv operations together, moving data as peers make room or arrive, so the
/// sends and receives of one group never wait on each other's order.
ncclResult_t run_p2p(const std::vector<operation>& ops);

/// Issues `op`: runs it now, or queues it when the calling thread is inside a group.
ncclResult_t submit(const operation& op);

}  // namespace simcuda::nccl
