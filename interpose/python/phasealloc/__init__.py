"""phasealloc: a phase-aware CUDA caching allocator for PyTorch RLHF jobs.

    import phasealloc
    phasealloc.enable()                   # before anything initialises CUDA
    with phasealloc.phase("generation"):
        out = model.generate(...)
    print(phasealloc.summary())

or, with no code change: PHASEALLOC=1 python train.py (every process that inherits the variable
swaps its allocator at `import torch`), or phasealloc-run python train.py.

enable() loads libphasealloc_torch.so (PHASEALLOC_LIBRARY, else the copy inside this package) and
makes it torch's CUDA allocator: through the c10 bridge (libphasealloc_c10.so, built against the
installed torch: PyTorch's whole allocator API works, private pools and CUDA graphs are served by
PyTorch's native allocator), else through torch.cuda.memory.CUDAPluggableAllocator (see _bridge.py).
It routes empty_cache / set_per_process_memory_fraction / record_stream to it, keeps torch.cuda's
memory statistics and snapshots answering from its books, and detects phases.
Configuration: PHASEALLOC_CONF (see interpose/README.md), or enable(conf=...).
Offload copies: host_buffer, chunk_offloader, host_stats, trim_host (phasealloc.host_buffers).
Same-address offload: offload, restore (blocks leave the GPU and come back at the same addresses),
tag (what a block of code allocates carries a name that offload and restore can move), graph_pool
(a CUDA graph captured into it moves with offload(pool=) / restore(pool=)), move_handle (what
offload and restore return with non_blocking=True: wait, done, wait_stream), offload_kind
("host-backed", or "unmapping" on a driver before CUDA 12.2).

This module imports nothing heavy: the start-up hook imports it in every Python process.
"""

import atexit
import os
import warnings

from ._library import PhaseallocError, library_path, load
from ._phases import current_phase, phase, set_phase
from .host_buffers import chunk_offloader, host_buffer, host_stats, trim_host
from ._same_address import OffloadOutOfMemory, graph_pool, move_handle, offload, offload_kind, restore, tag

__all__ = [
    "PhaseallocError", "enable", "is_enabled", "phase", "current_phase", "set_phase", "stats", "summary",
    "trace", "snapshot", "config", "library_path", "load", "empty_cache",
    "host_buffer", "host_stats", "trim_host", "chunk_offloader", "offload", "restore", "tag", "graph_pool",
    "OffloadOutOfMemory", "move_handle", "offload_kind",
]

_allocator = None  # the CUDAPluggableAllocator, kept alive with the process
_enabled = False

_HOOKS = (
    ("set_init_fn", "phasealloc_init"),
    ("set_reset_fn", "phasealloc_reset"),
    ("set_memory_fraction_fn", "phasealloc_memory_fraction"),
    ("set_record_stream_fn", "phasealloc_record_stream"),
)

CUDA_INITIALIZED_MESSAGE = (
    "phasealloc: CUDA is already initialised in this process, so PyTorch's allocator can no longer be "
    "swapped; this process keeps PyTorch's native allocator. Call phasealloc.enable() (or set "
    "PHASEALLOC=1) before anything touches CUDA: before the first CUDA tensor, torch.cuda.current_device(), "
    "set_device, or a library that initialises CUDA at import.")


def is_enabled():
    """Whether phasealloc is this process's CUDA allocator."""
    return _enabled


def enable(conf=None, detect_phases=True, library=None):
    """Makes phasealloc torch's CUDA allocator. Returns True when it is (now or already), False when
    CUDA was already initialised (a warning says so; the native allocator stays).

    conf: a PHASEALLOC_CONF text to use instead of the environment variable.
    detect_phases: install the phase-detection hooks (generate, backward, optimizer step, forwards).
    library: the path of libphasealloc_torch.so (default: PHASEALLOC_LIBRARY, then the package's copy).
    Raises PhaseallocError for a bad configuration and OSError when the library is missing; the
    allocator is not swapped then.
    """
    global _allocator, _enabled
    if _enabled:
        return True
    import torch  # noqa: F401  (the caller has torch; this only makes it importable here)

    if torch.cuda.is_initialized():
        warnings.warn(CUDA_INITIALIZED_MESSAGE, RuntimeWarning, stacklevel=2)
        return False
    variable, backend = _requested_backend()
    if backend not in (None, "native"):
        # An explicit choice of another PyTorch backend wins over the swap, as the user asked for it.
        warnings.warn("phasealloc: %s asks for PyTorch's %r allocator backend; this process keeps it and phasealloc "
                      "is not enabled (remove backend:%s to use phasealloc)" % (variable, backend, backend),
                      RuntimeWarning, stacklevel=2)
        return False
    from . import _config, _library, _limits, _torch_api

    load(library)
    if conf is not None:
        _config.configure(conf)
    effective = _config.effective_config()  # raises on a bad PHASEALLOC_CONF, before the swap
    if "device:model" in effective:
        warnings.warn("phasealloc: device:model hands torch fake addresses; only tests and tools may use it",
                      RuntimeWarning, stacklevel=2)

    from . import _bridge

    bridge_mode = _bridge.mode()
    if bridge_mode != "pluggable":
        try:
            _bridge.install(torch, _library.library_path())
        except _bridge.BridgeUnavailable as exc:
            if bridge_mode == "c10":
                raise PhaseallocError("phasealloc: PHASEALLOC_BRIDGE=c10 but the c10 bridge is unavailable: %s" % exc)
            warnings.warn(
                "phasealloc: c10 bridge unavailable (%s); using CUDAPluggableAllocator: torch.cuda.MemPool, CUDA "
                "graph capture and CUDA IPC export are refused in this process (see phasealloc._limits)%s. To fix, "
                "reinstall phasealloc into this interpreter after torch: pip install --force-reinstall --no-deps "
                "<phasealloc source>" % (exc, _companion_consequence()),
                RuntimeWarning, stacklevel=2)
    if _bridge.active():
        _enabled = True
        _torch_api.install(("memory_summary",))  # torch answers the rest; this appends the phase table
    else:
        path = _library.library_path()
        allocator = torch.cuda.memory.CUDAPluggableAllocator(path, "phasealloc_malloc", "phasealloc_free")
        hooks = getattr(allocator, "_allocator", None)
        for setter, symbol in _HOOKS:
            set_fn = getattr(hooks, setter, None)
            if set_fn is not None:
                set_fn(_library.function_address(symbol))
        try:
            torch.cuda.memory.change_current_allocator(allocator)
        except RuntimeError as exc:  # "Can't swap an already initialized allocator"
            warnings.warn("%s (%s)" % (CUDA_INITIALIZED_MESSAGE, exc), RuntimeWarning, stacklevel=2)
            return False
        _allocator = allocator
        _enabled = True
        # Through the pluggable allocator torch's memory API raises: answer it from our books, and
        # make what cannot work fail clearly.
        _torch_api.install()
        _limits.install()
    if detect_phases:
        from . import _phase_detect

        _phase_detect.install()
    offload_mode = next((mode for mode in ("auto", "pressure") if ",offload:%s" % mode in "," + effective), None)
    if offload_mode is not None:  # learns from detected phases and from phasealloc.phase blocks
        from . import _auto_offload

        try:
            _auto_offload.install(torch, offload_mode)
        except Exception as exc:  # noqa: BLE001 (the allocator is swapped in already: keep it, say so)
            _auto_offload.uninstall()
            warnings.warn("phasealloc: offload:%s could not start (%s: %s); nothing is offloaded "
                          "automatically" % (offload_mode, type(exc).__name__, exc), RuntimeWarning, stacklevel=2)
    atexit.register(_flush_traces)
    return True


def _requested_backend():
    """(variable, backend) when the variable PyTorch reads its allocator settings from
    (_bridge.torch_alloc_conf: PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF) names an allocator
    backend, else (None, None)."""
    from ._bridge import backend_named, torch_alloc_conf

    variable, settings = torch_alloc_conf()
    backend = backend_named(settings) if settings is not None else None
    return (variable, backend) if backend else (None, None)


def _companion_consequence():
    """What the pluggable path loses when the OOM companion library is missing too ("" when present)."""
    from . import _library

    companion = os.path.join(os.path.dirname(_library.library_path()), "libphasealloc_torch_oom.so")
    if os.path.exists(companion):
        return ""
    return ", and out of memory raises RuntimeError, not torch.cuda.OutOfMemoryError"


def _flush_traces():
    """At interpreter exit, before threads and objects are torn down: write the running traces'
    files (the library writes them again when the process exits, if it gets that far). A crash late in
    the exit (torch's autograd threads can abort as Python finalizes) then cannot lose a trace."""
    from . import _library

    lib = _library.loaded()
    if lib is not None and lib.phasealloc_trace_flush() != 0:
        warnings.warn("phasealloc: %s" % _library.last_error(), RuntimeWarning)


def stats(device=None):
    """The library's books of one device: torch.cuda.memory_stats() keys, "phases" (per-phase peaks,
    fragmentation, counts), "phasealloc" (device, policy, limits) and "host" (the host buffer pool,
    see host_stats). device=None: the current CUDA device when torch is enabled, else 0; device=-1:
    {"devices": {index: stats}} for every engine."""
    from . import _library

    lib = load()
    index = _device_or_default(device)
    return _library.json_call(lib.phasealloc_stats_json, index, "phasealloc.stats")


def summary(device=None):
    """A readable per-phase table (peak allocated, peak reserved, fragmentation, device calls)."""
    from . import _report

    if device is None:
        devices = stats(-1)["devices"]
        if not devices:
            return "phasealloc: no engine yet (nothing allocated)"
        return "\n\n".join(_report.phase_table(devices[k]) for k in sorted(devices, key=int))
    return _report.phase_table(stats(device))


def snapshot(device=None):
    """Segments and blocks in the shape of torch.cuda.memory_snapshot() (device=None: every device)."""
    from . import _library

    lib = load()
    index = -1 if device is None else _device_or_default(device)
    segments = _library.json_call(lib.phasealloc_snapshot_json, index, "phasealloc.snapshot")
    for seg in segments:
        seg["segment_pool_id"] = tuple(seg["segment_pool_id"])
    return segments


def config():
    """The configuration in force, in the PHASEALLOC_CONF grammar with every key spelled out."""
    from . import _config

    load()
    return _config.effective_config()


def empty_cache():
    """Returns every cached byte of every engine to the device (what torch.cuda.empty_cache() does)."""
    load().phasealloc_reset()


class trace:
    """Records an allocation trace while the block runs:

        with phasealloc.trace("trace.%p.patrace"):
            train_step()

    The pattern expands %p (pid), %r (rank), %d (device); files ending in .txt are text traces.
    """

    def __init__(self, path):
        self.path = os.fspath(path)

    def __enter__(self):
        from . import _library

        lib = load()
        _library.check(lib.phasealloc_trace_start(self.path.encode()), "phasealloc.trace(%r)" % self.path)
        return self

    def __exit__(self, exc_type, exc, tb):
        from . import _library

        lib = load()
        _library.check(lib.phasealloc_trace_stop(), "end of phasealloc.trace(%r)" % self.path)
        return False


def _device_or_default(device):
    if device == -1:
        return -1
    if _enabled:
        from . import _torch_api

        return _torch_api.device_index(device)
    return 0 if device is None else int(device)
