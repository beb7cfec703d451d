"""Fake torch.cuda.memory: the pluggable allocator API and the memory statistics as torch has them."""

import collections
import contextlib
import ctypes
import pickle

__all__ = [
    "CUDAPluggableAllocator", "change_current_allocator", "memory_stats", "memory_stats_as_nested_dict",
    "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_accumulated_memory_stats", "memory_summary", "memory_snapshot",
    "use_mem_pool", "max_memory_cached",
]

_current_allocator = None

_UNSUPPORTED = "CUDAPluggableAllocator does not yet support {}. If you need it, please file an issue describing your use case."


class _CUDAAllocator:
    """Stands for torch._C._cuda_CUDAAllocator: the hook setters take integer function pointers."""

    def __init__(self, alloc_fn, free_fn):
        self.alloc_fn, self.free_fn = alloc_fn, free_fn
        self.init_fn = self.reset_fn = self.memory_fraction_fn = self.record_stream_fn = None

    def set_init_fn(self, fn):
        self.init_fn = int(fn)

    def set_reset_fn(self, fn):
        self.reset_fn = int(fn)

    def set_memory_fraction_fn(self, fn):
        self.memory_fraction_fn = int(fn)

    def set_record_stream_fn(self, fn):
        self.record_stream_fn = int(fn)


class CUDAPluggableAllocator:
    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        allocator = ctypes.CDLL(path_to_so_file)
        self._alloc_fn = ctypes.cast(getattr(allocator, alloc_fn_name), ctypes.c_void_p).value
        self._free_fn = ctypes.cast(getattr(allocator, free_fn_name), ctypes.c_void_p).value
        assert self._alloc_fn is not None and self._free_fn is not None
        self._allocator = _CUDAAllocator(self._alloc_fn, self._free_fn)


def change_current_allocator(allocator):
    global _current_allocator
    from . import is_initialized

    if _current_allocator is not None or is_initialized():
        raise RuntimeError("Can't swap an already initialized allocator")
    _current_allocator = allocator


def _pluggable_check(what):
    from . import is_initialized

    if _current_allocator is not None and is_initialized():
        raise RuntimeError(_UNSUPPORTED.format(what))


def memory_stats_as_nested_dict(device=None):
    from . import is_initialized

    if not is_initialized():
        return {}
    _pluggable_check("getDeviceStats")
    return {}


def memory_stats(device=None):
    result = []

    def _recurse(prefix, obj):
        if isinstance(obj, dict):
            if prefix:
                prefix += "."
            for k, v in obj.items():
                _recurse(prefix + k, v)
        else:
            result.append((prefix, obj))

    _recurse("", memory_stats_as_nested_dict(device=device))
    result.sort()
    return collections.OrderedDict(result)


def memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device=device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    return memory_stats(device=device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device=device).get("reserved_bytes.all.peak", 0)


def max_memory_cached(device=None):
    return max_memory_reserved(device=device)  # torch's deprecated alias, via module globals


def reset_peak_memory_stats(device=None):
    _pluggable_check("resetPeakStats")


def reset_accumulated_memory_stats(device=None):
    _pluggable_check("resetAccumulatedStats")


def memory_summary(device=None, abbreviated=False):
    stats = memory_stats(device=device)
    return "|  fake torch memory summary: allocated %d, reserved %d  |" % (
        stats.get("allocated_bytes.all.current", 0), stats.get("reserved_bytes.all.current", 0))


def _snapshot(device=None):
    _pluggable_check("snapshot")
    return {"segments": [], "device_traces": []}


def memory_snapshot():
    return _snapshot()["segments"]


def _dump_snapshot(filename="dump_snapshot.pickle"):
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def _record_memory_history(enabled="all", *args, **kwargs):
    _pluggable_check("recordHistory")


@contextlib.contextmanager
def use_mem_pool(pool, device=None):
    yield
