// The operations' entry points, and NCCL groups. Inside ncclGroupStart/ncclGroupEnd (per thread,
// nestable) operations are checked at their call and queued; the outermost ncclGroupEnd runs
// them in issue order, with each run of consecutive sends and receives progressing together
// (torch's all-to-all and batched point-to-point are such runs).
#include <vector>

#include "operation.hpp"
#include "status.hpp"

namespace simcuda::nccl {

namespace {

// Counts `ops` as running on their communicators for its lifetime.
class in_flight_guard {
 public:
  explicit in_flight_guard(const std::vector<operation>& ops) : ops_(ops) {
    for (const operation& op : ops_) op.comm->in_flight.fetch_add(1);
  }
  ~in_flight_guard() {
    for (const operation& op : ops_) op.comm->in_flight.fetch_sub(1);
  }
  in_flight_guard(const in_flight_guard&) = delete;
  in_flight_guard& operator=(const in_flight_guard&) = delete;

 private:
  const std::vector<operation>& ops_;
};

thread_local int group_depth = 0;
thread_local std::vector<operation> group_queue;

ncclResult_t run(const std::vector<operation>& ops) {
  in_flight_guard guard(ops);
  std::size_t i = 0;
  while (i < ops.size()) {
    if (!is_p2p(ops[i].kind)) {
      if (ncclResult_t r = run_collective(ops[i]); r != ncclSuccess) return r;
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < ops.size() && is_p2p(ops[end].kind)) ++end;
    std::vector<operation> batch(ops.begin() + static_cast<std::ptrdiff_t>(i), ops.begin() + static_cast<std::ptrdiff_t>(end));
    if (ncclResult_t r = run_p2p(batch); r != ncclSuccess) return r;
    i = end;
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t submit(const operation& op) {
  if (ncclResult_t r = validate(op); r != ncclSuccess) return r;
  if (group_depth > 0) {
    group_queue.push_back(op);
    return ncclSuccess;
  }
  return run({op});
}

}  // namespace simcuda::nccl

using namespace simcuda::nccl;

namespace {

operation make(op_kind kind, const char* function, const void* send, void* recv, std::size_t count, ncclDataType_t type,
               ncclRedOp_t op, int peer, ncclComm_t comm, void* stream) {
  operation o;
  o.kind = kind;
  o.function = function;
  o.send = send;
  o.recv = recv;
  o.count = count;
  o.type = type;
  o.op = op;
  o.peer = peer;
  o.comm = comm;
  o.stream = stream;
  return o;
}

}  // namespace

extern "C" {

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd", "not inside a group (no matching ncclGroupStart)");
  if (--group_depth > 0) return ncclSuccess;
  std::vector<operation> ops;
  ops.swap(group_queue);
  return run(ops);
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           void* stream) {
  return submit(make(op_kind::all_reduce, "ncclAllReduce", send, recv, count, type, op, 0, comm, stream));
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, void* stream) {
  return submit(make(op_kind::reduce, "ncclReduce", send, recv, count, type, op, root, comm, stream));
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           void* stream) {
  return submit(make(op_kind::broadcast, "ncclBroadcast", send, recv, count, type, ncclSum, root, comm, stream));
}

ncclResult_t ncclBcast(void* buffer, size_t count, ncclDataType_t type, int root, ncclComm_t comm, void* stream) {
  return submit(make(op_kind::broadcast, "ncclBcast", buffer, buffer, count, type, ncclSum, root, comm, stream));
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           void* stream) {
  return submit(make(op_kind::all_gather, "ncclAllGather", send, recv, send_count, type, ncclSum, 0, comm, stream));
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recv_count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, void* stream) {
  return submit(make(op_kind::reduce_scatter, "ncclReduceScatter", send, recv, recv_count, type, op, 0, comm, stream));
}

ncclResult_t ncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm, void* stream) {
  return submit(make(op_kind::all_to_all, "ncclAlltoAll", send, recv, count, type, ncclSum, 0, comm, stream));
}

ncclResult_t ncclGather(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                        void* stream) {
  return submit(make(op_kind::gather, "ncclGather", send, recv, count, type, ncclSum, root, comm, stream));
}

ncclResult_t ncclScatter(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                         void* stream) {
  return submit(make(op_kind::scatter, "ncclScatter", send, recv, count, type, ncclSum, root, comm, stream));
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, void* stream) {
  return submit(make(op_kind::send, "ncclSend", send, nullptr, count, type, ncclSum, peer, comm, stream));
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, void* stream) {
  return submit(make(op_kind::recv, "ncclRecv", nullptr, recv, count, type, ncclSum, peer, comm, stream));
}

}  // extern "C"
