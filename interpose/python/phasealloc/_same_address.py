"""Same-address offload: the bytes of live tensors leave the GPU for host memory mapped at the same
device addresses, and come back there.

    moved = phasealloc.offload(optimizer_state_tensors)   # their device pages go back
    ...                                                  # generation: the memory is free for it
    phasealloc.restore(optimizer_state_tensors)           # device pages again, same addresses

Every pointer stays valid while offloaded: a kernel that touches the tensor reads and writes its
bytes over the link (slowly) instead of faulting, so graphs, registered buffers and views keep
working. Only pages that the named tensors' blocks cover alone leave (a page shared with a block
that stays, stays: `kept_bytes`); only the requested bytes are copied, never free cached memory.
Needs device:cuda_vmm (simcuda emulates it); elsewhere offload raises PhaseallocError naming the
device. A driver before CUDA 12.2 cannot map host memory at device addresses: there the blocks'
pages are unmapped while offloaded (a kernel that touches one faults, as after torch_memory_saver's
pause), the first offload says so once (a RuntimeWarning), and offload_kind() answers "unmapping". Both calls return when the copies are done, unless non_blocking.

Tensors allocated under `with phasealloc.tag("name"):` carry the tag: offload(tag="name") and
restore(tag="name") move every block that carries it, and the phasealloc policy gives the first 15
names pages of their own, so nothing of such a tag stays behind (tensors allocated on other threads,
such as autograd's backward, carry those threads' tags). A name never given to phasealloc.tag()
moves nothing.

A CUDA graph's memory moves with its pool when the graph was captured into phasealloc.graph_pool()
(a torch.cuda.MemPool whose segments phasealloc lends): offload(pool=p) moves every segment of it,
with its contents, and restore(pool=p) brings them back at the same addresses, so the graph replays
to the same result. The segments move whole; only the blocks PyTorch's allocator holds in them are
copied (its free space, a graph's scratch, is not). A
graph captured into PyTorch's own pool (the default) cannot be moved: offload(pool=) says so.

With non_blocking=True both return a move_handle once the copies are enqueued on phasealloc's copy
stream, so they overlap the caller's work. An offload's device pages go back when its copies are
done: at handle.wait(), at a later offload/restore that finds them done, or when an allocation
would otherwise run out of memory (it waits for them); the tensors must not be written meanwhile.
A restore's pages are the GPU's at once, and the current stream is made to wait for its copies
(on the device, not the host), so work queued on it afterwards sees the bytes; another stream
needs handle.wait_stream(stream).

restore() with no tensors and no tag restores every offloaded range of the device. When the GPU has
no memory for a range even after phasealloc released its cache, restore raises OffloadOutOfMemory: the bytes
stay on the host, correct (unmapped, where offload_kind() is "unmapping"), and a later restore may succeed.
"""

import contextlib
import ctypes

from ._library import PhaseallocError, last_error, load


class OffloadOutOfMemory(PhaseallocError):
    """restore() found no device memory for a range; its bytes stay on the host at their addresses."""


class _result(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("blocks", "ranges", "page_bytes", "copied_bytes", "kept_bytes")]


FIELDS = [field for field, _ in _result._fields_]


def plain_tensors(tensors):
    """The plain tensors that hold the bytes of `tensors`: each tensor itself, or, for a wrapper
    subclass (a DTensor: its local shard; any __tensor_flatten__ subclass), its inner tensors."""
    out = []
    for t in tensors:
        if hasattr(type(t), "__tensor_flatten__"):
            names, _ = t.__tensor_flatten__()
            inner = [getattr(t, name) for name in names]
            out.extend(plain_tensors([x for x in inner if hasattr(x, "data_ptr")]))
        else:
            out.append(t)
    return out


def _blocks(tensors, ours_only):
    """(device index, the start addresses of the tensors' storages), one address per storage;
    ours_only: storages phasealloc does not hold (PyTorch's native allocator's) are left out."""
    if hasattr(tensors, "data_ptr") or not hasattr(tensors, "__iter__"):
        tensors = [tensors]
    device = None
    addresses, seen = [], set()
    for t in plain_tensors(tensors):
        if not getattr(t, "is_cuda", False):
            raise PhaseallocError("phasealloc.offload/restore: %r is not a CUDA tensor" % (type(t).__name__,))
        if device is None:
            device = t.device.index
        elif t.device.index != device:
            raise PhaseallocError("phasealloc.offload/restore: tensors on cuda:%d and cuda:%d in one call"
                                  % (device, t.device.index))
        address = t.untyped_storage().data_ptr()  # the block's start: what the allocator handed out
        if not address or address in seen:
            continue
        seen.add(address)
        if ours_only and load().phasealloc_owner_device(address) < 0:
            continue
        addresses.append(address)
    return device, addresses


def _status(status, out):
    done = {field: getattr(out, field) for field in FIELDS}
    if status == -2:
        raise OffloadOutOfMemory("%s (done before: %s)" % (last_error(), done))
    if status != 0:
        raise PhaseallocError("%s (done before: %s)" % (last_error(), done))
    return done


def _name_bytes(name, what):
    if not isinstance(name, str):
        raise PhaseallocError("%s: a tag is named by a str, not %r" % (what, type(name).__name__))
    return name.encode()


def _tag_number(name):
    number = load().phasealloc_tag_id(_name_bytes(name, "phasealloc.tag"))
    if number == 0:
        raise PhaseallocError(last_error())
    return number


_tag_listeners = []  # called with (name, number) as a tag block is entered (offload:auto's touches)


@contextlib.contextmanager
def tag(name):
    """Tensors this thread allocates inside the block carry the tag `name` (nested: the innermost);
    offload(tag=name) and restore(tag=name) then move them all. Under offload:auto, entering the
    block is a use of the tag's blocks in the current phase. Yields the tag's number."""
    number = _tag_number(name)
    for listener in list(_tag_listeners):
        listener(name, number)
    lib = load()
    previous = lib.phasealloc_set_thread_tag(number)
    try:
        yield number
    finally:
        lib.phasealloc_set_thread_tag(previous)


class move_handle:
    """The moves a non-blocking offload() or restore() left in flight (phasealloc's copy stream is
    copying them). `outcome` is the dict the blocking call returns."""

    def __init__(self, outcome, tickets):
        self.outcome = outcome
        self._tickets = [(device, ticket) for device, ticket in tickets if ticket]  # (device, ticket)

    def _finish(self, wait):
        lib = load()
        left = []
        for device, ticket in self._tickets:
            answer = lib.phasealloc_finish_moves(device, ticket, 1 if wait else 0)
            if answer < 0:
                raise PhaseallocError(last_error())
            if answer == 0:
                left.append((device, ticket))
        self._tickets = left
        return not left

    def done(self):
        """Whether every copy is done; the moves whose copies are done are finished (an offload's
        device pages go back)."""
        return self._finish(wait=False)

    def wait(self):
        """Waits for the copies and finishes the moves. Returns `outcome`."""
        self._finish(wait=True)
        return self.outcome

    def wait_stream(self, stream=None):
        """Makes `stream` (a torch.cuda.Stream; None: the current stream of each device) wait for
        the copies on the device, without blocking the host."""
        from .host_buffers import _stream_handle

        lib = load()
        for device, ticket in self._tickets:
            if stream is None:
                import torch

                handle = _stream_handle(torch.cuda.current_stream(device))
            else:
                handle = _stream_handle(stream)
            if lib.phasealloc_order_after_moves(device, ticket, handle) != 0:
                raise PhaseallocError(last_error())

    def __repr__(self):
        return "move_handle(%s, in flight: %d)" % (self.outcome, len(self._tickets))


def _current_device(device):
    if device is not None:
        return int(device)
    import torch

    return torch.cuda.current_device()


def _start(restore, device, addresses, tag_number):
    """A non-blocking move on `device` (by tag when tag_number, else over addresses): (outcome, ticket)."""
    lib = load()
    array = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
    out = _result()
    ticket = ctypes.c_uint64(0)
    start = lib.phasealloc_restore_start if restore else lib.phasealloc_offload_start
    status = start(device, array, len(addresses), tag_number, ctypes.addressof(out), ctypes.byref(ticket))
    return _status(status, out), ticket.value


def _handle(restore, outcome, tickets):
    handle = move_handle(outcome, tickets)
    if restore:  # work queued next on the current stream sees the restored bytes
        handle.wait_stream()
    return handle


_KINDS = {0: "none", 1: "host-backed", 2: "unmapping"}
_said_unmapping = set()  # devices whose unmapping offload was announced


def offload_kind(device=None):
    """How phasealloc offloads on `device` (the current one by default): "host-backed" (an offloaded
    tensor stays usable at its address, over the link), "unmapping" (the driver cannot map host
    memory at device addresses: an offloaded tensor faults if touched before restore()), or "none"
    (not phasealloc's cuda_vmm device: offload raises)."""
    device = _current_device(device)
    kind = load().phasealloc_offload_kind(device)
    if kind < 0:
        raise PhaseallocError("phasealloc.offload_kind: %s" % last_error())
    return _KINDS[kind]


def _say_if_unmapping(device, what):
    """Warns once per device, at its first offload (of `what`: the blocks it names), that offloaded
    blocks are unmapped there."""
    if device in _said_unmapping:
        return
    _said_unmapping.add(device)
    if load().phasealloc_offload_kind(device) == 2:
        import warnings

        warnings.warn("phasealloc: the CUDA driver of device %d cannot map host memory at device addresses "
                      "(host-located cuMemCreate needs CUDA 12.2+): offloaded blocks are unmapped until "
                      "restored, and a kernel that touches one faults (an illegal address); restore them "
                      "before use. This offload unmaps %s" % (device, what), RuntimeWarning, stacklevel=3)


def _named(addresses):
    """The blocks at `addresses`, for a message: the first few, and how many."""
    shown = ", ".join("%#x" % a for a in addresses[:3])
    return "the block%s at %s%s" % ("s" if len(addresses) > 1 else "", shown,
                                    " and %d more" % (len(addresses) - 3) if len(addresses) > 3 else "")


def _nothing(non_blocking):
    done = dict.fromkeys(FIELDS, 0)
    return move_handle(done, []) if non_blocking else done


def _call_tag(name, tag_name, device, non_blocking=False):
    number = load().phasealloc_find_tag(_name_bytes(tag_name, "phasealloc.offload/restore"))
    if number == 0:  # never given to phasealloc.tag(): nothing carries it (looking it up numbers nothing)
        return _nothing(non_blocking)
    device = _current_device(device)
    if name == "phasealloc_offload_tag":
        _say_if_unmapping(device, "every block carrying the tag %r" % tag_name)
    if non_blocking:
        restore = name == "phasealloc_restore_tag"
        outcome, ticket = _start(restore, device, [], number)
        return _handle(restore, outcome, [(device, ticket)])
    out = _result()
    return _status(getattr(load(), name)(device, number, ctypes.addressof(out)), out)


def _call(name, tensors, device, ours_only=False, non_blocking=False):
    addresses = []
    if tensors is not None:
        tensor_device, addresses = _blocks(tensors, ours_only)
        if not addresses:  # an empty list names nothing (None names every range, for restore)
            return _nothing(non_blocking)
        device = tensor_device
    device = _current_device(device)
    if name == "phasealloc_offload":
        _say_if_unmapping(device, _named(addresses) if addresses else "every offloaded range")
    if non_blocking:
        restore = name == "phasealloc_restore"
        outcome, ticket = _start(restore, device, addresses, 0)
        return _handle(restore, outcome, [(device, ticket)])
    array = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
    out = _result()
    return _status(getattr(load(), name)(device, array, len(addresses), ctypes.addressof(out)), out)


def graph_pool():
    """A torch.cuda.MemPool whose segments phasealloc lends to PyTorch's allocator: capture a graph
    into it (torch.cuda.graph(g, pool=phasealloc.graph_pool().id)) and offload(pool=) / restore(pool=)
    move the graph's memory."""
    import torch

    from . import is_enabled

    if not is_enabled():
        raise PhaseallocError("phasealloc.graph_pool(): phasealloc is not this process's CUDA allocator, so "
                              "there is no memory of its own to lend the pool (enable it first)")
    return torch.cuda.MemPool(torch.cuda.memory._get_current_allocator().allocator())


_HELD = ("active_allocated", "active_pending_free")  # blocks whose bytes someone may still read


def _pool_segments(pool):
    """{device: ([segment addresses], [(address, bytes) PyTorch's allocator holds in them])} of a
    graph_pool(); PhaseallocError when PyTorch's allocator holds the pool's memory itself."""
    lib = load()
    by_device = {}
    for seg in pool.snapshot():
        address = seg["address"]
        if lib.phasealloc_owner_device(address) < 0:
            raise PhaseallocError(
                "phasealloc.offload/restore(pool=): the pool's segment at %#x is PyTorch's allocator's own "
                "memory, which phasealloc cannot move; capture the graph into phasealloc.graph_pool()" % address)
        segments, held = by_device.setdefault(seg["device"], ([], []))
        segments.append(address)
        at = address
        for block in seg["blocks"]:
            if block["state"] in _HELD:
                held.append((at, block["size"]))
            at += block["size"]
    return by_device


def _call_pool(name, pool, non_blocking=False):
    """Moves the pool's segments, copying only the blocks PyTorch's allocator holds in them (its free
    space has no bytes anyone reads: a graph's kernels write their scratch before reading it)."""
    restore = name == "phasealloc_restore"
    done = dict.fromkeys(FIELDS, 0)
    tickets = []
    for device, (segments, held) in sorted(_pool_segments(pool).items()):
        held = sorted(held)  # none held: the segments' pages move, no byte is copied
        if not restore:
            _say_if_unmapping(int(device), "the graph pool's segments: " + _named(segments))
        array = (ctypes.c_void_p * len(segments))(*segments)
        span_addrs = (ctypes.c_void_p * max(1, len(held)))(*[a for a, _ in held])
        span_bytes = (ctypes.c_size_t * max(1, len(held)))(*[n for _, n in held])
        out = _result()
        ticket = ctypes.c_uint64(0)
        status = load().phasealloc_move_lent(int(device), int(restore), int(non_blocking), array, len(segments),
                                             span_addrs, span_bytes, len(held), ctypes.addressof(out),
                                             ctypes.byref(ticket))
        moved = _status(status, out)
        tickets.append((int(device), ticket.value))
        done = {field: done[field] + moved[field] for field in FIELDS}
    return _handle(restore, done, tickets) if non_blocking else done


def offload_ours(tensors, device=None):
    """offload() of the tensors whose storage phasealloc holds; the others are left as they are
    (what offload:auto moves: a class may hold storages of PyTorch's own allocator, e.g. a graph's)."""
    return _call("phasealloc_offload", tensors, device, ours_only=True)


def restore_ours(tensors, device=None):
    return _call("phasealloc_restore", tensors, device, ours_only=True)


def offload(tensors=None, device=None, tag=None, pool=None, non_blocking=False):
    """Moves the bytes of `tensors` (a tensor or an iterable of them, on one GPU), of every block
    carrying `tag` on `device` (the current device by default), or of a graph_pool()'s segments, to
    host memory at the same addresses. Returns {"blocks", "ranges", "page_bytes", "copied_bytes",
    "kept_bytes"}; with non_blocking, a move_handle at once (its device pages go back when the
    copies are done: handle.wait(), or an allocation that needs them; do not write the tensors
    until then)."""
    if sum(x is not None for x in (tensors, tag, pool)) != 1:
        raise PhaseallocError("phasealloc.offload: name the tensors, a tag or a pool (one of the three)")
    if pool is not None:
        return _call_pool("phasealloc_offload", pool, non_blocking)
    if tag is not None:
        return _call_tag("phasealloc_offload_tag", tag, device, non_blocking)
    return _call("phasealloc_offload", tensors, device, non_blocking=non_blocking)


def restore(tensors=None, device=None, tag=None, pool=None, non_blocking=False):
    """Brings the offloaded ranges holding `tensors`, the blocks carrying `tag`, or a graph_pool()'s
    segments back to device pages (none of them: every range of `device`, the current device by
    default). Returns the same dict as offload(); with non_blocking, a move_handle at once, the
    current stream ordered after the copies (another stream: handle.wait_stream(stream))."""
    if sum(x is not None for x in (tensors, tag, pool)) > 1:
        raise PhaseallocError("phasealloc.restore: name the tensors, a tag or a pool, not more than one")
    if pool is not None:
        return _call_pool("phasealloc_restore", pool, non_blocking)
    if tag is not None:
        return _call_tag("phasealloc_restore_tag", tag, device, non_blocking)
    return _call("phasealloc_restore", tensors, device, non_blocking=non_blocking)
