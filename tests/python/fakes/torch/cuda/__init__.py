"""Fake torch.cuda: CUDA lazy-init state, streams as integers, the allocator hooks."""

import contextlib
import ctypes
import os

from . import memory
from .memory import *  # noqa: F401,F403  (torch.cuda re-exports torch.cuda.memory, like the real one)
from .memory import _record_memory_history, _snapshot, _dump_snapshot  # noqa: F401

_initialized = os.environ.get("FAKE_TORCH_CUDA_INITIALIZED") == "1"


def is_initialized():
    return _initialized


def is_available():
    return True


def device_count():
    return int(os.environ.get("FAKE_TORCH_DEVICE_COUNT", "1"))


def _lazy_init():
    """Like torch: the first CUDA use initialises the current allocator (init hook of a pluggable)."""
    global _initialized
    if _initialized:
        return
    _initialized = True
    alloc = memory._current_allocator
    if alloc is not None and alloc._allocator.init_fn:
        ctypes.CFUNCTYPE(None, ctypes.c_int)(alloc._allocator.init_fn)(device_count())


def current_device():
    _lazy_init()
    return 0


def empty_cache():
    if not is_initialized():
        return
    alloc = memory._current_allocator
    if alloc is not None and alloc._allocator.reset_fn:
        ctypes.CFUNCTYPE(None)(alloc._allocator.reset_fn)()


def set_per_process_memory_fraction(fraction, device=None):
    _lazy_init()
    device = 0 if device is None else device
    alloc = memory._current_allocator
    if alloc is not None and alloc._allocator.memory_fraction_fn:
        ctypes.CFUNCTYPE(None, ctypes.c_double, ctypes.c_int)(alloc._allocator.memory_fraction_fn)(fraction, device)


# --- what PyTorch's C++ does with the pluggable allocator's function pointers -------------------

_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
_RECORD = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def _test_malloc(size, device=0, stream=0):
    """A tensor allocation: the alloc function pointer with (size, device, stream). Only for sizes
    that cannot fail (a C++ exception cannot cross ctypes)."""
    _lazy_init()
    alloc = memory._current_allocator
    if alloc is None:
        raise RuntimeError("fake torch: no pluggable allocator is current")
    return _MALLOC(alloc._alloc_fn)(size, device, stream)


def _test_free(ptr, size, device=0, stream=0):
    alloc = memory._current_allocator
    _FREE(alloc._free_fn)(ptr, size, device, stream)


def _test_record_stream(ptr, stream):
    alloc = memory._current_allocator
    if alloc._allocator.record_stream_fn:
        _RECORD(alloc._allocator.record_stream_fn)(ptr, stream)


class CUDAGraph:
    captures = 0

    def capture_begin(self, pool=None, capture_error_mode="global"):
        CUDAGraph.captures += 1

    def capture_end(self):
        pass


@contextlib.contextmanager
def graph(cuda_graph, pool=None, stream=None):
    cuda_graph.capture_begin(pool=pool)
    try:
        yield
    finally:
        cuda_graph.capture_end()
