"""Page-locked host buffers for offload copies, from phasealloc's per-GPU host buffer pool.

    buf = phasealloc.host_buffer(64 << 20)          # pinned, the same bytes every iteration
    host = buf.tensor(torch.float16)                # a CPU tensor over the buffer
    with torch.cuda.stream(s):
        host.copy_(gpu_chunk, non_blocking=True)
    ...
    buf.release(s)                                  # reused only after the work enqueued on s so far

    off = phasealloc.chunk_offloader()
    handle = off.offload(chunk)                     # GPU -> pooled pinned buffer, on a copy stream
    del chunk                                       # the GPU memory goes back to the allocator
    chunk = off.reload(handle)                      # back on the GPU; the current stream waits

The pool of each GPU ordinal holds at most host_budget bytes of page-locked memory (PHASEALLOC_CONF,
default 2GiB; host_budget:0 disables it) and hands the same buffers out again every iteration;
host_stats() shows its books (names as torch.cuda.host_memory_stats()), trim_host() frees its idle
buffers. On device:model the buffers are ordinary heap memory (real bytes, not page-locked).

Design note (chunk_offloader)
Rationale: offloading chunks (ProTrain, ZeRO-Offload) copies them to the host and back every
  iteration; the copies overlap compute only when they run on a side stream into page-locked
  memory, and both directions must be ordered against the compute streams without a device-wide
  synchronisation. Page-locked memory is scarce, so a copy that finds the budget used up should
  still work, only slower.
Approach: offload waits (on the GPU) for the current stream, copies into a pooled buffer with
  non_blocking=True on a per-device copy stream, records an event there, and marks the GPU tensor
  used by the copy stream (record_stream), so its memory is not reused before the copy has read
  it. reload allocates on the copy stream, waits for the offload's event, copies back, makes the
  current stream wait for the copy stream, marks the result used by the current stream, and
  releases the host buffer recording the copy stream, so the pool reuses it only after the copy
  has read it. When host_buffer fails (over budget, pool disabled) the chunk goes to an ordinary
  pageable CPU tensor with a synchronous copy, and `fallbacks` counts it.
Limitations: the current stream waits for the whole copy stream at reload (prefetch by calling
  reload early); offload holds no reference to the GPU tensor, but the caller must drop its own
  for the memory to be freed; handle.host is valid for CPU reads only after handle.wait().
"""

import ctypes
import operator
import threading
import warnings

from . import _library
from ._library import PhaseallocError

__all__ = ["host_buffer", "host_stats", "trim_host", "chunk_offloader", "offloaded_chunk"]

_release_lock = threading.Lock()


def _ordinal(device):
    """A GPU ordinal from None (the current device, else 0), an int, "cuda:N" or a torch.device."""
    if device is None:
        from . import _device_or_default

        return _device_or_default(None)
    if isinstance(device, bool):
        raise TypeError("phasealloc: expected a CUDA device, got %r" % (device,))
    if isinstance(device, int):
        return device
    from . import _torch_api

    return _torch_api.device_index(device)


def _stream_handle(stream):
    """The cudaStream_t value of a torch.cuda.Stream (or ExternalStream), an int handle, or None
    (the legacy default stream, torch's default stream)."""
    if stream is None:
        return None
    handle = getattr(stream, "cuda_stream", stream)
    try:
        value = operator.index(handle)
    except TypeError:
        raise TypeError("phasealloc: expected a torch.cuda.Stream, an int stream handle or None, got %r"
                        % (stream,)) from None
    if value < 0:
        raise ValueError("phasealloc: a stream handle is not negative, got %d" % value)
    return value or None


class host_buffer:
    """A page-locked host buffer of at least `nbytes` bytes from `device`'s pool.

        with phasealloc.host_buffer(n) as buf:
            buf.view()[:4] = b"abcd"
        # or: buf = phasealloc.host_buffer(n); ...; buf.release(stream)

    .ptr is its address, .nbytes the size asked for. release(stream) hands it back: a copy
    enqueued on `stream` before the call may still use it (the pool reuses it only after that);
    leaving a `with` block releases it on the default stream unless it was released already.
    A second release raises PhaseallocError. Raises PhaseallocError when the pool refuses (over
    budget, disabled, bad device), with the library's message.
    """

    def __init__(self, nbytes, device=None):
        nbytes = operator.index(nbytes)
        if nbytes <= 0:
            raise ValueError("phasealloc.host_buffer needs a positive size, got %d" % nbytes)
        self.device = _ordinal(device)
        lib = _library.load()
        ptr = lib.phasealloc_host_alloc(nbytes, self.device)
        if not ptr:
            raise PhaseallocError("phasealloc.host_buffer(%d, device %d) failed: %s"
                                  % (nbytes, self.device, _library.last_error()))
        self.ptr = ptr
        self.nbytes = nbytes
        self._released = False

    @property
    def released(self):
        return self._released

    def release(self, stream=None):
        """Hands the buffer back; `stream`: a torch.cuda.Stream, an int handle, or None (the
        default stream) whose work enqueued so far may still use the buffer."""
        handle = _stream_handle(stream)
        with _release_lock:
            if self._released:
                raise PhaseallocError("phasealloc.host_buffer at %#x (%d bytes, device %d) was already released"
                                      % (self.ptr, self.nbytes, self.device))
            self._released = True
        lib = _library.load()
        _library.check(lib.phasealloc_host_free(self.ptr, self.device, handle),
                       "phasealloc.host_buffer(%#x).release" % self.ptr)

    def view(self):
        """A writable memoryview of the `nbytes` bytes (valid until release)."""
        self._check_held("view")
        array = (ctypes.c_ubyte * self.nbytes).from_address(self.ptr)
        return memoryview(array).cast("B")

    def tensor(self, dtype=None):
        """A 1-D torch CPU tensor of `dtype` (default torch.uint8) sharing the buffer's memory: as many
        elements as fit in nbytes. Valid until release."""
        import torch

        dtype = torch.uint8 if dtype is None else dtype
        itemsize = torch.empty((), dtype=dtype).element_size()
        count = self.nbytes // itemsize
        if count == 0:
            raise ValueError("phasealloc.host_buffer of %d bytes holds no %s element" % (self.nbytes, dtype))
        return torch.frombuffer(self.view(), dtype=dtype, count=count)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self._released:
            self.release()
        return False

    def __del__(self):
        # Never released: the buffer stays out of the pool (a copy may still be using it).
        if getattr(self, "_released", True) is False:
            try:
                warnings.warn("phasealloc.host_buffer at %#x (%d bytes) was never released; it stays "
                              "unavailable to the pool" % (self.ptr, self.nbytes), ResourceWarning, stacklevel=2)
            except Exception:
                pass

    def __repr__(self):
        return "phasealloc.host_buffer(ptr=%#x, nbytes=%d, device=%d%s)" % (
            self.ptr, self.nbytes, self.device, ", released" if self._released else "")

    def _check_held(self, what):
        if self._released:
            raise PhaseallocError("phasealloc.host_buffer at %#x: %s after release" % (self.ptr, what))


def host_stats(device=None):
    """The host buffer pool's books of one device (the "host" object of phasealloc.stats):
    allocations.*, allocated_bytes.*, active_requests.*, active_bytes.* (current, peak, allocated,
    freed), num_host_alloc, num_host_free, num_reuses, num_waits, num_over_budget, budget_bytes.
    device=-1: {ordinal: books} for every device with an engine."""
    lib = _library.load()
    index = _ordinal(device)
    raw = _library.json_call(lib.phasealloc_stats_json, index, "phasealloc.host_stats")
    if index == -1:
        return {int(k): v["host"] for k, v in raw["devices"].items()}
    return raw["host"]


def trim_host(device=None):
    """Frees the idle buffers of `device`'s host pool (None: every device's)."""
    lib = _library.load()
    index = -1 if device is None else _ordinal(device)
    _library.check(lib.phasealloc_host_trim(index), "phasealloc.trim_host(%r)" % (device,))


class offloaded_chunk:
    """A chunk on the host, as chunk_offloader.offload returns it (reload it, or discard it)."""

    __slots__ = ("host", "buffer", "shape", "dtype", "device", "event")

    def __init__(self, host, buffer, shape, dtype, device, event):
        self.host = host  # CPU tensor (over the pinned buffer, or pageable)
        self.buffer = buffer  # host_buffer, or None for the pageable fallback
        self.shape = shape
        self.dtype = dtype
        self.device = device  # the GPU it came from
        self.event = event  # recorded after the offload copy

    @property
    def pinned(self):
        return self.buffer is not None

    def wait(self):
        """Blocks until the offload copy finished: handle.host may then be read on the CPU."""
        self.event.synchronize()

    def __repr__(self):
        return "phasealloc.offloaded_chunk(shape=%s, dtype=%s, from %s, %s)" % (
            tuple(self.shape), self.dtype, self.device,
            "reloaded" if self.host is None else ("pinned" if self.pinned else "pageable"))


class chunk_offloader:
    """Moves CUDA tensors to pooled page-locked host buffers and back on a side copy stream (one
    per GPU). See the design note at the top of this module. Counters: offloads, reloads,
    fallbacks (offloads that went to pageable memory; last_fallback_error says why)."""

    def __init__(self):
        import torch

        self._torch = torch
        self._streams = {}  # GPU ordinal -> copy stream
        self.offloads = 0
        self.reloads = 0
        self.fallbacks = 0
        self.last_fallback_error = ""

    def copy_stream(self, device):
        """The copy stream of `device` (a torch.device or ordinal), created at first use."""
        index = device.index if isinstance(device, self._torch.device) else int(device)
        stream = self._streams.get(index)
        if stream is None:
            stream = self._streams[index] = self._torch.cuda.Stream(device=index)
        return stream

    def offload(self, tensor):
        """Starts copying CUDA `tensor` to the host and returns its offloaded_chunk. Keeps no
        reference to `tensor`: drop yours and its GPU memory is freed (after the copy read it)."""
        torch = self._torch
        if not isinstance(tensor, torch.Tensor) or not tensor.is_cuda:
            raise ValueError("phasealloc.chunk_offloader.offload needs a CUDA tensor, got %r" % (type(tensor),))
        device = tensor.device
        stream = self.copy_stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))  # whatever produced the tensor comes first
        nbytes = tensor.numel() * tensor.element_size()
        buffer = None
        if nbytes > 0:
            try:
                buffer = host_buffer(nbytes, device.index)
            except PhaseallocError as exc:
                self.fallbacks += 1
                self.last_fallback_error = str(exc)
        try:
            if buffer is not None:
                host = buffer.tensor(tensor.dtype).view(tensor.shape)
            else:
                host = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
            with torch.cuda.stream(stream):
                host.copy_(tensor, non_blocking=buffer is not None)
                done = torch.cuda.Event()
                done.record(stream)
        except BaseException:
            if buffer is not None:
                buffer.release(stream)
            raise
        tensor.record_stream(stream)  # its memory is reused only after the copy read it
        self.offloads += 1
        return offloaded_chunk(host, buffer, tensor.shape, tensor.dtype, device, done)

    def reload(self, handle, device=None):
        """Copies an offloaded chunk back to `device` (default: the GPU it came from) and returns
        the new CUDA tensor; the current stream waits for the copy. The host buffer goes back to
        the pool, reused only after the copy read it."""
        torch = self._torch
        self._check_live(handle, "reload")
        target = handle.device if device is None else torch.device(device)
        if target.type != "cuda":
            raise ValueError("phasealloc.chunk_offloader.reload needs a CUDA device, got %s" % target)
        if target.index is None:
            target = torch.device("cuda", torch.cuda.current_device())
        stream = self.copy_stream(target)
        stream.wait_event(handle.event)  # the offload copy (maybe another GPU's stream) is done first
        with torch.cuda.stream(stream):
            out = torch.empty(handle.shape, dtype=handle.dtype, device=target)
            out.copy_(handle.host, non_blocking=handle.pinned)
        current = torch.cuda.current_stream(target)
        current.wait_stream(stream)
        out.record_stream(current)  # allocated on the copy stream, used on the current one
        self._release(handle, stream, target)
        self.reloads += 1
        return out

    def discard(self, handle):
        """Drops an offloaded chunk without reloading it (its buffer goes back to the pool)."""
        self._check_live(handle, "discard")
        self._release(handle, self.copy_stream(handle.device), handle.device)

    def _release(self, handle, stream, stream_device):
        buffer = handle.buffer
        handle.host = handle.buffer = None
        if buffer is None:
            return
        if stream_device != handle.device:
            # The pool records its event with the buffer's GPU: order that GPU's copy stream after
            # the copy on `stream` and record there.
            source = self.copy_stream(handle.device)
            source.wait_stream(stream)
            stream = source
        buffer.release(stream)  # the offload copy ran on this stream too: it is covered

    @staticmethod
    def _check_live(handle, what):
        if not isinstance(handle, offloaded_chunk):
            raise TypeError("phasealloc.chunk_offloader.%s needs an offloaded_chunk, got %r" % (what, type(handle)))
        if handle.host is None:
            raise PhaseallocError("phasealloc.chunk_offloader.%s: this chunk was already reloaded or discarded" % what)
