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
    std::vector<operation> batch(ops.begin() + static_cast<std::ptrdiff_t>(i),
                                 ops.begin() + static_cast<std::ptrdiff_t>(end));
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

extern "C" {

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd", "not inside a group (no matching ncclGroupStart)");
  if (--group_depth > 0) return ncclSuccess;
  std::vector<operation> ops;
  ops.swap(group_queue);
  return run(ops);
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, void* stream) {
  return submit({.kind = op_kind::all_reduce,
                 .function = "ncclAllReduce",
                 .comm = comm,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .type = type,
                 .op = op,
                 .peer = 0,
                 .stream = stream});
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, void* stream) {
  return submit({.kind = op_kind::reduce,
                 .function = "ncclReduce",
                 .comm = comm,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .type = type,
                 .op = op,
                 .peer = root,
                 .stream = stream});
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           void* stream) {
  return submit({.kind = op_kind::broadcast,
                 .function = "ncclBroadcast",
                 .comm = comm,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .type = type,
                 .op = ncclSum,
                 .peer = root,
                 .stream = stream});
}

ncclResult_t ncclBcast(void* buffer, size_t count, ncclDataType_t type, int root, ncclComm_t comm, void* stream) {
  return submit({.kind = op_kind::broadcast,
                 .function = "ncclBcast",
                 .comm = comm,
                 .send = buffer,
                 .recv = buffer,
                 .count = count,
                 .type = type,
                 .op = ncclSum,
                 .peer = root,
                 .stream = stream});
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t send_count, ncclDataType_t type, ncclComm_t comm,
                           void* stream) {
  return submit({.kind = op_kind::all_gather,
                 .function = "ncclAllGather",
                 .comm = comm,
                 .send = send,
                 .recv = recv,
                 .count = send_count,
                 .type = type,
                 .op = ncclSum,
                 .peer = 0,
                 .stream = stream});
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recv_count, ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, void* stream) {
  return submit({.kind = op_kind::reduce_scatter,
                 .function = "ncclReduceScatter",
                 .comm = comm,
                 .send = send,
                 .recv = recv,
                 .count = recv_count,
                 .type = type,
                 .op = op,
                 .peer = 0,
                 .stream = stream});
}

ncclResult_t ncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                          void* stream) {
  return submit({.kind = op_kind::all_to_all,
                 .function = "ncclAlltoAll",
                 .comm = comm,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .type = type,
                 .op = ncclSum,
                 .peer = 0,
                 .stream = stream});
}

ncclResult_t ncclGather(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                        void* stream) {
  return submit({.kind = op_kind::gather,
                 .function = "ncclGather",
                 .comm = comm,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .type = type,
                 .op = ncclSum,
                 .peer = root,
                 .stream = stream});
}

ncclResult_t ncclScatter(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                         void* stream) {
  return submit({.kind = op_kind::scatter,
                 .function = "ncclScatter",
                 .comm = comm,
                 .send = send,
                 .recv = recv,
                 .count = count,
                 .type = type,
                 .op = ncclSum,
                 .peer = root,
                 .stream = stream});
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, void* stream) {
  return submit({.kind = op_kind::send,
                 .function = "ncclSend",
                 .comm = comm,
                 .send = send,
                 .recv = nullptr,
                 .count = count,
                 .type = type,
                 .op = ncclSum,
                 .peer = peer,
                 .stream = stream});
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, void* stream) {
  return submit({.kind = op_kind::recv,
                 .function = "ncclRecv",
                 .comm = comm,
                 .send = nullptr,
                 .recv = recv,
                 .count = count,
                 .type = type,
                 .op = ncclSum,
                 .peer = peer,
                 .stream = stream});
}

}  // extern "C"
