"""Same-address offload: the bytes of live tensors leave the GPU for host memory mapped at the same
device addresses, and come back there.

    moved = phasealloc.offload(optimizer_state_tensors)   # their device pages go back
    ...                                                  # generation: the memory is free for it
    phasealloc.restore(optimizer_state_tensors)           # device pages again, same addresses

Every pointer stays valid while offloaded: a kernel that touches the tensor reads and writes its
bytes over the link (slowly) instead of faulting, so graphs, registered buffers and views keep
working. Only pages that the named tensors' blocks cover alone leave (a page shared with a block
that stays, stays: `kept_bytes`); only the requested bytes are copied, never free cached memory.
Needs device:cuda_vmm on a CUDA 12.2+ driver (simcuda emulates it); elsewhere offload raises
PhaseallocError naming the device. Both calls return when the copies are done.

Tensors allocated under `with phasealloc.tag("name"):` carry the tag: offload(tag="name") and
restore(tag="name") move every block that carries it, and the phasealloc policy gives the first 15
names pages of their own, so nothing of such a tag stays behind (tensors allocated on other threads,
such as autograd's backward, carry those threads' tags). A name never given to phasealloc.tag()
moves nothing.

A CUDA graph's memory moves with its pool when the graph was captured into phasealloc.graph_pool()
(a torch.cuda.MemPool whose segments phasealloc lends): offload(pool=p) moves every segment of it,
with its contents, and restore(pool=p) brings them back at the same addresses, so the graph replays
to the same result. The segments move whole (the pool's free space inside them is copied too). A
graph captured into PyTorch's own pool (the default) cannot be moved: offload(pool=) says so.

restore() with no tensors and no tag restores every offloaded range of the device. When the GPU has
no memory for a range even after phasealloc released its cache, restore raises OffloadOutOfMemory: the bytes
stay on the host, correct, and a later restore may succeed.
"""

import contextlib
import ctypes

from ._library import PhaseallocError, last_error, load


class OffloadOutOfMemory(PhaseallocError):
    """restore() found no device memory for a range; its bytes stay on the host at their addresses."""


class _result(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("blocks", "ranges", "page_bytes", "copied_bytes", "kept_bytes")]


FIELDS = [field for field, _ in _result._fields_]


def _blocks(tensors, ours_only):
    """(device index, the start addresses of the tensors' storages), one address per storage;
    ours_only: storages phasealloc does not hold (PyTorch's native allocator's) are left out."""
    if hasattr(tensors, "data_ptr") or not hasattr(tensors, "__iter__"):
        tensors = [tensors]
    device = None
    addresses, seen = [], set()
    for t in tensors:
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


@contextlib.contextmanager
def tag(name):
    """Tensors this thread allocates inside the block carry the tag `name` (nested: the innermost);
    offload(tag=name) and restore(tag=name) then move them all. Yields the tag's number."""
    number = _tag_number(name)
    lib = load()
    previous = lib.phasealloc_set_thread_tag(number)
    try:
        yield number
    finally:
        lib.phasealloc_set_thread_tag(previous)


def _call_tag(name, tag_name, device):
    number = load().phasealloc_find_tag(_name_bytes(tag_name, "phasealloc.offload/restore"))
    if number == 0:  # never given to phasealloc.tag(): nothing carries it (looking it up numbers nothing)
        return dict.fromkeys(FIELDS, 0)
    if device is None:
        import torch

        device = torch.cuda.current_device()
    out = _result()
    return _status(getattr(load(), name)(int(device), number, ctypes.addressof(out)), out)


def _call(name, tensors, device, ours_only=False):
    addresses = []
    if tensors is not None:
        tensor_device, addresses = _blocks(tensors, ours_only)
        if not addresses:  # an empty list names nothing (None names every range, for restore)
            return dict.fromkeys(FIELDS, 0)
        device = tensor_device
    if device is None:
        import torch

        device = torch.cuda.current_device()
    array = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
    out = _result()
    return _status(getattr(load(), name)(int(device), array, len(addresses), ctypes.addressof(out)), out)


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


def _pool_segments(pool):
    """{device: the segment addresses} of a graph_pool(); PhaseallocError when PyTorch's allocator
    holds its memory itself."""
    lib = load()
    by_device = {}
    for seg in pool.snapshot():
        address = seg["address"]
        if lib.phasealloc_owner_device(address) < 0:
            raise PhaseallocError(
                "phasealloc.offload/restore(pool=): the pool's segment at %#x is PyTorch's allocator's own "
                "memory, which phasealloc cannot move; capture the graph into phasealloc.graph_pool()" % address)
        by_device.setdefault(seg["device"], []).append(address)
    return by_device


def _call_pool(name, pool):
    done = dict.fromkeys(FIELDS, 0)
    for device, addresses in sorted(_pool_segments(pool).items()):
        array = (ctypes.c_void_p * len(addresses))(*addresses)
        out = _result()
        moved = _status(getattr(load(), name)(int(device), array, len(addresses), ctypes.addressof(out)), out)
        done = {field: done[field] + moved[field] for field in FIELDS}
    return done


def offload_ours(tensors, device=None):
    """offload() of the tensors whose storage phasealloc holds; the others are left as they are
    (what offload:auto moves: a class may hold storages of PyTorch's own allocator, e.g. a graph's)."""
    return _call("phasealloc_offload", tensors, device, ours_only=True)


def restore_ours(tensors, device=None):
    return _call("phasealloc_restore", tensors, device, ours_only=True)


def offload(tensors=None, device=None, tag=None, pool=None):
    """Moves the bytes of `tensors` (a tensor or an iterable of them, on one GPU), of every block
    carrying `tag` on `device` (the current device by default), or of a graph_pool()'s segments, to
    host memory at the same addresses. Returns {"blocks", "ranges", "page_bytes", "copied_bytes",
    "kept_bytes"}."""
    if sum(x is not None for x in (tensors, tag, pool)) != 1:
        raise PhaseallocError("phasealloc.offload: name the tensors, a tag or a pool (one of the three)")
    if pool is not None:
        return _call_pool("phasealloc_offload", pool)
    if tag is not None:
        return _call_tag("phasealloc_offload_tag", tag, device)
    return _call("phasealloc_offload", tensors, device)


def restore(tensors=None, device=None, tag=None, pool=None):
    """Brings the offloaded ranges holding `tensors`, the blocks carrying `tag`, or a graph_pool()'s
    segments back to device pages (none of them: every range of `device`, the current device by
    default). Returns the same dict as offload()."""
    if sum(x is not None for x in (tensors, tag, pool)) > 1:
        raise PhaseallocError("phasealloc.restore: name the tensors, a tag or a pool, not more than one")
    if pool is not None:
        return _call_pool("phasealloc_restore", pool)
    if tag is not None:
        return _call_tag("phasealloc_restore_tag", tag, device)
    return _call("phasealloc_restore", tensors, device)
