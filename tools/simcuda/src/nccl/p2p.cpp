// ncclSend / ncclRecv through the mailboxes: one ring buffer per ordered pair of ranks in the
// communicator's shared memory, a byte stream in issue order (NCCL matches a pair's sends and
// receives in order too). The operations of one group progress together: each pass moves what the
// mailboxes allow, and a pass that moved nothing sleeps on the rank's doorbell until a peer moves.
// At values:off the byte counts flow as they would, but no byte is copied.
#include <algorithm>
#include <cstring>

#include "operation.hpp"
#include "simcuda/core.hpp"
#include "status.hpp"

namespace simcuda::nccl {

namespace {

struct transfer {
  const operation* op;
  std::size_t bytes;
  std::size_t done = 0;
};

// Moves what the mailbox allows; the number of bytes moved.
std::size_t progress(transfer& t) {
  ncclComm& comm = *t.op->comm;
  segment& shared = comm.shared;
  const bool sending = t.op->kind == op_kind::send;
  const int from = sending ? comm.rank : t.op->peer;
  const int to = sending ? t.op->peer : comm.rank;
  mailbox& box = shared.box(from, to);
  char* data = shared.box_data(from, to);
  std::uint64_t produced = box.produced.load(std::memory_order_acquire);
  std::uint64_t consumed = box.consumed.load(std::memory_order_acquire);
  std::size_t room = sending ? mailbox_bytes - static_cast<std::size_t>(produced - consumed)
                             : static_cast<std::size_t>(produced - consumed);
  std::size_t n = std::min(room, t.bytes - t.done);
  if (n == 0) return 0;
  std::uint64_t position = sending ? produced : consumed;
  std::size_t moved = current_config().values == value_level::off ? n : 0;
  while (moved < n) {
    std::size_t at = static_cast<std::size_t>((position + moved) % mailbox_bytes);
    std::size_t run = std::min(n - moved, mailbox_bytes - at);
    if (sending)
      std::memcpy(data + at, static_cast<const char*>(t.op->send) + t.done + moved, run);
    else
      std::memcpy(static_cast<char*>(t.op->recv) + t.done + moved, data + at, run);
    moved += run;
  }
  if (sending)
    box.produced.store(produced + n, std::memory_order_release);
  else
    box.consumed.store(consumed + n, std::memory_order_release);
  t.done += n;
  shared.ring(sending ? to : from);
  return n;
}

// A peer that exited fails a transfer only when the transfer still needs it: a send it will not
// receive, or a receive of bytes it has not put in the mailbox. A peer that finished its part and
// left (its last bytes still in the mailbox) is no error.
ncclResult_t check_peer(const transfer& t) {
  const ncclComm& comm = *t.op->comm;
  const int peer = t.op->peer;
  if (!comm.shared.peer_gone(peer)) return ncclSuccess;
  if (t.op->kind == op_kind::recv) {
    mailbox& box = comm.shared.box(peer, comm.rank);
    if (box.produced.load() != box.consumed.load()) return ncclSuccess;  // still bytes to take
  }
  return fail(ncclRemoteError, t.op->function, "rank %d (pid %d) exited with %zu of %zu bytes still to %s", peer,
              comm.shared.header().pid[peer].load(), t.bytes - t.done, t.bytes,
              t.op->kind == op_kind::send ? "send to it" : "receive from it");
}

// With virtual peers (Note [virtual peers]): a send to an absent rank is taken, a receive from one
// leaves its buffer as it is; what a rank sends itself in the batch is what it receives, in order.
void run_virtual(const std::vector<operation>& ops) {
  const bool copy = current_config().values != value_level::off;
  std::vector<const operation*> self_sends;
  for (const operation& op : ops)
    if (op.kind == op_kind::send && op.peer == op.comm->rank) self_sends.push_back(&op);
  std::size_t next_send = 0, send_at = 0;
  for (const operation& op : ops) {
    if (op.kind != op_kind::recv || op.peer != op.comm->rank) continue;
    std::size_t want = op.count * element_bytes(op.type), got = 0;
    while (got < want && next_send < self_sends.size()) {
      const operation& s = *self_sends[next_send];
      std::size_t left = s.count * element_bytes(s.type) - send_at, n = std::min(left, want - got);
      if (copy) std::memcpy(static_cast<char*>(op.recv) + got, static_cast<const char*>(s.send) + send_at, n);
      got += n;
      send_at += n;
      if (send_at == s.count * element_bytes(s.type)) ++next_send, send_at = 0;
    }
  }
}

}  // namespace

ncclResult_t run_p2p(const std::vector<operation>& ops) {
  std::vector<transfer> pending;
  for (const operation& op : ops) {
    // A rank sending to itself copies locally in NCCL: no connection, no buffers.
    if (op.kind == op_kind::recv && op.peer != op.comm->rank && !op.comm->memory->connect_p2p_receive(op.peer))
      return fail(ncclUnhandledCudaError, op.function,
                  "out of memory on device %d for the point-to-point buffers of peer %d", op.comm->device, op.peer);
    if (ncclResult_t r = enter_stream(op); r != ncclSuccess) return r;
    pending.push_back({&op, op.count * element_bytes(op.type)});
  }
  if (!ops.empty() && ops.front().comm->virtual_peers) {
    run_virtual(ops);
    return ncclSuccess;
  }
  auto finished = [](const transfer& t) { return t.done == t.bytes; };
  unsigned idle_passes = 0;
  pending.erase(std::remove_if(pending.begin(), pending.end(), finished), pending.end());
  while (!pending.empty()) {
    // The doorbell is read before the pass: a peer's move after it wakes the wait below.
    segment& waits_on = pending.front().op->comm->shared;
    std::uint32_t seen = waits_on.header().doorbell[waits_on.rank()].load();
    std::size_t moved = 0;
    for (transfer& t : pending) moved += progress(t);
    const char* function = pending.front().op->function;
    pending.erase(std::remove_if(pending.begin(), pending.end(), finished), pending.end());
    if (pending.empty() || moved != 0) continue;
    if (++idle_passes % 32 == 0)
      for (const transfer& t : pending)
        if (ncclResult_t r = check_peer(t); r != ncclSuccess) return r;
    if (ncclResult_t r = waits_on.wait_doorbell(seen, function); r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

}  // namespace simcuda::nccl
