// Argument checks of every operation, with NCCL's status codes: a bad communicator, type,
// operator or root is ncclInvalidArgument; a buffer that is not live device memory of the right
// extent is ncclInvalidArgument, said with the buffer's name and extent.
#include <cstdint>

#include "operation.hpp"
#include "simcuda/core.hpp"
#include "status.hpp"

namespace simcuda::nccl {

namespace {

ncclResult_t check_buffer(const operation& op, const void* pointer, std::size_t elements, const char* what) {
  std::size_t bytes = elements * element_bytes(op.type);
  if (bytes == 0) return ncclSuccess;
  if (pointer == nullptr) return fail(ncclInvalidArgument, op.function, "%s is NULL (for %zu bytes)", what, bytes);
  if (!device_range_accessible(pointer, bytes))
    return fail(ncclInvalidArgument, op.function,
                "%s %p + %zu bytes is not live device memory of the simulated GPU (freed, host memory, or too short)",
                what, pointer, bytes);
  return ncclSuccess;
}

bool reduces(op_kind kind) {
  return kind == op_kind::all_reduce || kind == op_kind::reduce_scatter || kind == op_kind::reduce;
}

bool rooted(op_kind kind) {
  return kind == op_kind::broadcast || kind == op_kind::reduce || kind == op_kind::gather || kind == op_kind::scatter;
}

}  // namespace

ncclResult_t validate(const operation& op) {
  if (ncclResult_t r = check_comm_usable(op.comm, op.function); r != ncclSuccess) return r;
  const ncclComm& comm = *op.comm;
  if (element_bytes(op.type) == 0)
    return fail(ncclInvalidArgument, op.function, "invalid data type %d", static_cast<int>(op.type));
  if (reduces(op.kind)) {
    int op_index = static_cast<int>(op.op);
    bool builtin = op_index >= 0 && op_index < ncclNumOps;
    std::size_t custom = static_cast<std::size_t>(op_index - ncclNumOps);
    bool made = op_index >= ncclNumOps && custom < comm.premul_ops.size() && comm.premul_ops[custom].live;
    if (!builtin && !made) return fail(ncclInvalidArgument, op.function, "invalid reduction operator %d", op_index);
    if (made && comm.premul_ops[custom].type != op.type)
      return fail(ncclInvalidArgument, op.function, "reduction operator %d was made for %s, not %s", op_index,
                  type_name(comm.premul_ops[custom].type), type_name(op.type));
  }
  if ((rooted(op.kind) || is_p2p(op.kind)) && (op.peer < 0 || op.peer >= comm.nranks))
    return fail(ncclInvalidArgument, op.function, "%s %d is outside 0..%d", is_p2p(op.kind) ? "peer" : "root", op.peer,
                comm.nranks - 1);
  const std::size_t n = static_cast<std::size_t>(comm.nranks);
  const bool root = op.peer == comm.rank;
  std::size_t send_elements = op.count;
  std::size_t recv_elements = op.count;
  switch (op.kind) {
    case op_kind::all_gather:
      recv_elements = op.count * n;
      break;
    case op_kind::reduce_scatter:
      send_elements = op.count * n;
      break;
    case op_kind::all_to_all:
      send_elements = recv_elements = op.count * n;
      break;
    case op_kind::broadcast:
      send_elements = root ? op.count : 0;
      break;
    case op_kind::reduce:
      recv_elements = root ? op.count : 0;
      break;
    case op_kind::gather:
      recv_elements = root ? op.count * n : 0;
      break;
    case op_kind::scatter:
      send_elements = root ? op.count * n : 0;
      break;
    case op_kind::send:
      recv_elements = 0;
      break;
    case op_kind::recv:
      send_elements = 0;
      break;
    case op_kind::all_reduce:
      break;
  }
  if (ncclResult_t r = check_buffer(op, op.send, send_elements, "sendbuff"); r != ncclSuccess) return r;
  if (ncclResult_t r = check_buffer(op, op.recv, recv_elements, "recvbuff"); r != ncclSuccess) return r;
  stream* s = stream_of(op);
  if (s == nullptr) return fail(ncclInvalidArgument, op.function, "stream %p is not a live stream", op.stream);
  if (stream_device(s) != comm.device)
    return fail(ncclInvalidArgument, op.function, "stream %p belongs to device %d, the communicator to device %d",
                op.stream, stream_device(s), comm.device);
  return ncclSuccess;
}

}  // namespace simcuda::nccl
