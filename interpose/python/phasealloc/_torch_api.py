"""torch.cuda's memory API, answered from phasealloc's books once phasealloc is the allocator.

Through the c10 bridge (_bridge.py) none of this is needed: torch's own functions read the bridge's
books, and only memory_summary is patched here (to append the per-phase table). The rest applies
to CUDAPluggableAllocator.

Rationale: with a pluggable allocator current, torch.cuda.memory_stats() and everything built on it
(memory_allocated, max_memory_reserved, memory_summary, reset_peak_memory_stats, snapshots,
_record_memory_history) raise RuntimeError ("CUDAPluggableAllocator does not yet support ..."), and
RLHF frameworks call them every step (verl logs max_memory_allocated/reserved, dumps snapshots).
Approach: the same functions, with the same signatures and return shapes, are
set on both torch.cuda and torch.cuda.memory (torch.cuda re-exports them, and torch's own helpers
look them up in torch.cuda.memory's globals, so its aliases such as max_memory_cached follow).
empty_cache needs no patch: the reset hook routes it to every engine.
Limitations: code that bound a function before enable() (`from torch.cuda import
memory_allocated` at import time) or calls torch._C._cuda_memoryStats directly still reaches the
pluggable allocator and gets its RuntimeError. Snapshots carry no stack frames and no history.
"""

import collections
import pickle
import sys
import warnings

from . import _library

PATCHED = (
    "memory_allocated",
    "memory_reserved",
    "max_memory_allocated",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "_snapshot",
    "memory_snapshot",
    "_dump_snapshot",
    "_record_memory_history",
)

_originals = []  # (module, name, original or _MISSING)
_MISSING = object()
_history_warned = False


def _torch():
    return sys.modules["torch"]


def device_index(device=None):
    """torch's device argument (None, int, "cuda:1", torch.device) as an ordinal."""
    torch = _torch()
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        head, _, index = device.partition(":")
        if head != "cuda":
            raise ValueError("phasealloc: expected a CUDA device, got %r" % device)
        return int(index) if index else int(torch.cuda.current_device())
    index = getattr(device, "index", None)
    if getattr(device, "type", "cuda") != "cuda":
        raise ValueError("phasealloc: expected a CUDA device, got %r" % (device,))
    return int(torch.cuda.current_device()) if index is None else int(index)


def raw_stats(device=None):
    """The library's stats object of one device (torch keys, phases, phasealloc info)."""
    lib = _library.load()
    return _library.json_call(lib.phasealloc_stats_json, device_index(device), "phasealloc stats")


def _torch_flat(raw):
    """Only torch's keys, with the ones torch has and the engine does not filled in."""
    flat = {k: v for k, v in raw.items() if k not in ("phases", "phasealloc", "host")}
    for name in ("oversize_allocations", "oversize_segments"):
        current = flat.pop(name + ".current", 0)
        flat.setdefault(name + ".current", current)
        flat.setdefault(name + ".peak", current)
        flat.setdefault(name + ".allocated", 0)
        flat.setdefault(name + ".freed", 0)
    flat.setdefault("max_split_size", -1)
    return flat


def _cuda_initialized():
    """PyTorch's stats readers answer {} before CUDA initialises, and never initialise it (torch
    2.15's reset_peak_memory_stats and memory_summary do initialise it: so do these)."""
    return bool(_torch().cuda.is_initialized())


def memory_stats(device=None):
    if not _cuda_initialized():
        return collections.OrderedDict()
    flat = _torch_flat(raw_stats(device))
    return collections.OrderedDict(sorted(flat.items()))


def memory_stats_as_nested_dict(device=None):
    nested = {}
    if not _cuda_initialized():
        return nested
    for key, value in _torch_flat(raw_stats(device)).items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


def memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None):
    lib = _library.load()
    _library.check(lib.phasealloc_reset_peak_stats(device_index(device)), "reset_peak_memory_stats")


def reset_accumulated_memory_stats(device=None):
    lib = _library.load()
    _library.check(lib.phasealloc_reset_accumulated_stats(device_index(device)), "reset_accumulated_memory_stats")


def memory_summary(device=None, abbreviated=False):
    from . import _report

    text = ""
    original = _original("memory_summary")
    if original is not None:
        try:
            # torch's own table, built on the patched memory_stats (looked up in its module globals).
            text = original(device=device, abbreviated=abbreviated)
        except Exception:  # an older or newer torch whose summary wants keys we lack
            text = ""
    return (text + "\n" if text else "") + _report.phase_table(raw_stats(device))


def _segments(device=None):
    if not _cuda_initialized():
        return []
    lib = _library.load()
    segments = _library.json_call(lib.phasealloc_snapshot_json, -1 if device is None else device_index(device),
                                  "phasealloc snapshot")
    for seg in segments:
        seg["segment_pool_id"] = tuple(seg.get("segment_pool_id", (0, 0)))
    return segments


def _device_count():
    try:
        return max(1, int(_torch().cuda.device_count()))
    except Exception:
        return 1


def _snapshot(device=None, *args, **kwargs):
    from . import _config

    return {
        "segments": _segments(None),  # torch's _snapshot ignores `device` too: every device
        "device_traces": [[] for _ in range(_device_count())],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "phasealloc": _config.effective_config()},
        "external_annotations": [],
    }


def memory_snapshot(*args, **kwargs):
    return _segments(None)


def _dump_snapshot(filename="dump_snapshot.pickle"):
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def _record_memory_history(enabled="all", *args, **kwargs):
    global _history_warned
    if enabled and not _history_warned:
        _history_warned = True
        warnings.warn(
            "phasealloc is the CUDA allocator: torch.cuda.memory._record_memory_history records nothing; "
            "snapshots carry segments and blocks but no event history or stack frames. "
            "Use `with phasealloc.trace(path):` for an allocation trace.",
            RuntimeWarning, stacklevel=2)


def _original(name):
    for module, attr, original in _originals:
        if attr == name and original is not _MISSING:
            return original
    return None


def install(names=PATCHED):
    """Patches `names` (default: all of PATCHED) on torch.cuda and torch.cuda.memory (idempotent).
    With the c10 bridge torch answers everything itself and only memory_summary is patched, to
    append the per-phase table."""
    if _originals:
        return
    torch = _torch()
    this = sys.modules[__name__]
    for module in (torch.cuda, getattr(torch.cuda, "memory", None)):
        if module is None:
            continue
        for name in names:
            _originals.append((module, name, getattr(module, name, _MISSING)))
            setattr(module, name, getattr(this, name))


def uninstall():
    """Puts torch's functions back."""
    while _originals:
        module, name, original = _originals.pop()
        if original is _MISSING:
            if hasattr(module, name):
                delattr(module, name)
        else:
            setattr(module, name, original)


def installed():
    return bool(_originals)
