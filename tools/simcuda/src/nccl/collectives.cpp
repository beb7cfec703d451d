// The collectives, through the staging slots of the communicator's shared memory. One step: every
// rank copies (part of) its input into its slot, all meet at the barrier, every rank reads what it
// needs from the others' slots into its output. Steps alternate between two banks of slots, so a
// step needs one barrier: a rank writing bank b again has passed the barrier after which everyone
// finished reading it. Reductions combine the ranks' values in rank order, so every rank computes
// the same bits, as NCCL's do. At values:off (no kernel computes anything) a collective moves no
// bytes: the ranks still meet once, so order, peers' failures and the connection memory stay.
#include <algorithm>
#include <cstring>

#include "operation.hpp"
#include "simcuda/core.hpp"
#include "status.hpp"

namespace simcuda::nccl {

namespace {

reduction reduction_of(const operation& op) {
  const ncclComm& comm = *op.comm;
  reduction how;
  how.ranks = comm.nranks;
  bool floating = op.type == ncclFloat16 || op.type == ncclFloat32 || op.type == ncclFloat64 ||
                  op.type == ncclBfloat16 || op.type == ncclFloat8e4m3 || op.type == ncclFloat8e5m2;
  switch (static_cast<int>(op.op)) {
    case ncclSum:
      how.op = reduction::kind::sum;
      break;
    case ncclProd:
      how.op = reduction::kind::prod;
      break;
    case ncclMax:
      how.op = reduction::kind::max;
      break;
    case ncclMin:
      how.op = reduction::kind::min;
      break;
    case ncclAvg:
      // NCCL: floating types pre-multiply by 1/nranks and sum; integers sum, then divide.
      if (floating) {
        how.op = reduction::kind::premul_sum;
        how.scalar = 1.0 / comm.nranks;
      } else {
        how.op = reduction::kind::avg_int;
      }
      break;
    default: {
      const ncclComm::premul_op& made = comm.premul_ops[static_cast<std::size_t>(op.op - ncclNumOps)];
      how.op = reduction::kind::premul_sum;
      how.scalar = made.on_device ? load_scalar(made.device_scalar, made.type) : made.scalar;
    }
  }
  return how;
}

// One step's exchange: this rank's slot of the current bank, the barrier, then the peers' slots.
// With virtual peers every rank's slot is this rank's (each absent rank holds this rank's values)
// and there is nobody to wait for.
struct exchange {
  ncclComm& comm;
  const char* function;

  char* mine() const {
    return comm.virtual_peers ? comm.staging.data() + static_cast<std::size_t>(comm.bank) * slot_bytes
                              : comm.shared.slot(comm.rank, comm.bank);
  }
  char* of(int rank) const { return comm.virtual_peers ? mine() : comm.shared.slot(rank, comm.bank); }
  ncclResult_t publish() { return comm.virtual_peers ? ncclSuccess : comm.shared.barrier(function); }
  void done() { comm.bank ^= 1; }
  /// Whether `rank` runs in this process's job: with virtual peers only this rank does.
  bool present(int rank) const { return !comm.virtual_peers || rank == comm.rank; }
};

const char* in(const void* base, std::size_t offset) { return static_cast<const char*>(base) + offset; }
char* out(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }

}  // namespace

stream* stream_of(const operation& op) {
  // A null handle is the default stream of the current device: here, the communicator's.
  int previous = current_device();
  set_current_device(op.comm->device);
  stream* s = resolve_stream(op.stream);
  set_current_device(previous);
  return s;
}

ncclResult_t enter_stream(const operation& op) {
  stream* s = stream_of(op);
  if (s == nullptr) return fail(ncclInvalidArgument, op.function, "stream %p is not a live stream", op.stream);
  if (refuse_in_capture(s) != graph_status::ok)
    return static_cast<ncclResult_t>(unsupported(library, op.function,
                                                 "an NCCL operation in a stream capture (CUDA graph) is not simulated; "
                                                 "capture invalidated",
                                                 ncclInvalidUsage));
  tick();
  return ncclSuccess;
}

ncclResult_t run_collective(const operation& op) {
  ncclComm& comm = *op.comm;
  if (!comm.memory->connect_ring())
    return fail(ncclUnhandledCudaError, op.function,
                "out of memory on device %d for the communicator's connection buffers (%zu bytes)", comm.device,
                sizing().ring_connection_bytes() * static_cast<std::size_t>(sizing().channels));
  if (ncclResult_t r = enter_stream(op); r != ncclSuccess) return r;
  const std::size_t esize = element_bytes(op.type);
  const int n = comm.nranks;
  const int me = comm.rank;
  const std::size_t whole = slot_bytes / esize;                                  // elements of a whole slot
  const std::size_t piece = slot_bytes / (esize * static_cast<std::size_t>(n));  // elements of 1/n of one
  exchange x{comm, op.function};
  if (current_config().values == value_level::off) {
    if (ncclResult_t r = x.publish(); r != ncclSuccess) return r;
    x.done();
    return ncclSuccess;
  }
  if (comm.virtual_peers && comm.staging.empty()) comm.staging.resize(2 * slot_bytes);
  const reduction how = reduction_of(op);
  std::vector<const void*> inputs(static_cast<std::size_t>(n));

  switch (op.kind) {
    case op_kind::all_reduce:
    case op_kind::reduce:
      for (std::size_t at = 0; at < op.count; at += whole) {
        std::size_t c = std::min(whole, op.count - at);
        std::memcpy(x.mine(), in(op.send, at * esize), c * esize);
        if (ncclResult_t r = x.publish(); r != ncclSuccess) return r;
        if (op.kind == op_kind::all_reduce || me == op.peer) {
          for (int k = 0; k < n; ++k) inputs[static_cast<std::size_t>(k)] = x.of(k);
          reduce(out(op.recv, at * esize), inputs.data(), n, c, op.type, how);
        }
        x.done();
      }
      return ncclSuccess;

    case op_kind::broadcast:
      for (std::size_t at = 0; at < op.count; at += whole) {
        std::size_t c = std::min(whole, op.count - at);
        if (me == op.peer) std::memcpy(x.mine(), in(op.send, at * esize), c * esize);
        if (ncclResult_t r = x.publish(); r != ncclSuccess) return r;
        // An absent root holds this rank's values: the buffer stays as it is.
        if (x.present(op.peer)) std::memmove(out(op.recv, at * esize), x.of(op.peer), c * esize);
        x.done();
      }
      return ncclSuccess;

    case op_kind::all_gather:
    case op_kind::gather:
      for (std::size_t at = 0; at < op.count; at += whole) {
        std::size_t c = std::min(whole, op.count - at);
        std::memcpy(x.mine(), in(op.send, at * esize), c * esize);
        if (ncclResult_t r = x.publish(); r != ncclSuccess) return r;
        if (op.kind == op_kind::all_gather || me == op.peer)
          for (int k = 0; k < n; ++k)
            std::memmove(out(op.recv, (static_cast<std::size_t>(k) * op.count + at) * esize), x.of(k), c * esize);
        x.done();
      }
      return ncclSuccess;

    case op_kind::reduce_scatter:
    case op_kind::all_to_all:
    case op_kind::scatter:
      // Each step moves `c` elements of every rank's block: the slot holds n pieces, piece d for rank d.
      if (piece == 0)
        return fail(ncclInvalidUsage, op.function,
                    "%d ranks' pieces of %zu-byte elements do not fit the simulator's %zu-byte staging slot", n, esize,
                    slot_bytes);
      for (std::size_t at = 0; at < op.count; at += piece) {
        std::size_t c = std::min(piece, op.count - at);
        if (op.kind != op_kind::scatter || me == op.peer)
          for (int d = 0; d < n; ++d)
            std::memcpy(x.mine() + static_cast<std::size_t>(d) * piece * esize,
                        in(op.send, (static_cast<std::size_t>(d) * op.count + at) * esize), c * esize);
        if (ncclResult_t r = x.publish(); r != ncclSuccess) return r;
        const std::size_t my_piece = static_cast<std::size_t>(me) * piece * esize;
        if (op.kind == op_kind::reduce_scatter) {
          for (int k = 0; k < n; ++k) inputs[static_cast<std::size_t>(k)] = x.of(k) + my_piece;
          reduce(out(op.recv, at * esize), inputs.data(), n, c, op.type, how);
        } else if (op.kind == op_kind::all_to_all) {
          for (int k = 0; k < n; ++k)
            std::memcpy(out(op.recv, (static_cast<std::size_t>(k) * op.count + at) * esize), x.of(k) + my_piece,
                        c * esize);
        } else if (x.present(op.peer)) {  // an absent root's scatter leaves the buffer as it is
          std::memmove(out(op.recv, at * esize), x.of(op.peer) + my_piece, c * esize);
        }
        x.done();
      }
      return ncclSuccess;

    case op_kind::send:
    case op_kind::recv:
      break;
  }
  return fail(ncclInternalError, op.function, "not a collective");
}

}  // namespace simcuda::nccl
