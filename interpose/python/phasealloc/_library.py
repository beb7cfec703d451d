"""Finding and loading libphasealloc_torch.so, and the ctypes prototypes of its C API.

The library is looked up, in order: the PHASEALLOC_LIBRARY environment variable (a path to the
.so), then libphasealloc_torch.so inside this package (where `make install` puts it). It is
loaded once per process; ctypes never unloads it, and torch's CUDAPluggableAllocator opens the
same path, so both see the same engines.
"""

import ctypes
import json
import os
import threading

LIBRARY_NAME = "libphasealloc_torch.so"

_lock = threading.Lock()
_lib = None
_path = None


class PhaseallocError(RuntimeError):
    """A phasealloc call failed; the message is the library's last error."""


def library_path():
    """The path of the library this process uses (or would load)."""
    if _path is not None:
        return _path
    env = os.environ.get("PHASEALLOC_LIBRARY")
    if env:
        return os.path.abspath(env)
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)


# phasealloc_pressure_fn: int (*)(int device, size_t bytes), called when an allocation runs out of memory
# (PRESSURE_HANDLER() is the NULL pointer: no handler).
PRESSURE_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_size_t)


def _declare(lib):
    c_int, c_double, c_void_p, c_char_p, c_ssize_t, c_size_t = (
        ctypes.c_int, ctypes.c_double, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ssize_t, ctypes.c_size_t)
    prototypes = {
        # phasealloc_malloc is left out on purpose: it throws C++ exceptions on failure, which
        # ctypes cannot catch. Python code allocates through phasealloc_try_malloc.
        "phasealloc_try_malloc": (c_void_p, [c_ssize_t, c_int, c_void_p]),
        "phasealloc_last_malloc_failure": (c_char_p, [c_void_p]),
        "phasealloc_free": (None, [c_void_p, c_ssize_t, c_int, c_void_p]),
        "phasealloc_init": (None, [c_int]),
        "phasealloc_reset": (None, []),
        "phasealloc_memory_fraction": (None, [c_double, c_int]),
        "phasealloc_record_stream": (None, [c_void_p, c_void_p]),
        "phasealloc_configure": (c_int, [c_char_p]),
        "phasealloc_config": (c_char_p, []),
        "phasealloc_phase_begin": (c_int, [c_char_p]),
        "phasealloc_phase_end": (c_int, []),
        "phasealloc_phase_set": (c_int, [c_char_p]),
        "phasealloc_current_phase": (c_char_p, []),
        "phasealloc_stats_json": (c_char_p, [c_int]),
        "phasealloc_reset_peak_stats": (c_int, [c_int]),
        "phasealloc_set_limit_bytes": (c_int, [c_int, c_size_t]),
        "phasealloc_set_request_divisions": (c_int, [ctypes.POINTER(c_size_t), c_size_t]),
        "phasealloc_hold_device_calls": (c_int, [c_int, c_int]),
        "phasealloc_enable_peer_access": (c_int, [c_int, c_int]),
        "phasealloc_reset_accumulated_stats": (c_int, [c_int]),
        "phasealloc_snapshot_json": (c_char_p, [c_int]),
        "phasealloc_trace_start": (c_int, [c_char_p]),
        "phasealloc_trace_stop": (c_int, []),
        "phasealloc_trace_flush": (c_int, []),
        "phasealloc_host_alloc": (c_void_p, [c_size_t, c_int]),
        "phasealloc_host_free": (c_int, [c_void_p, c_int, c_void_p]),
        "phasealloc_host_trim": (c_int, [c_int]),
        "phasealloc_owner_device": (c_int, [c_void_p]),
        # out: a phasealloc_offload_result (_same_address._result), passed by address
        "phasealloc_offload": (c_int, [c_int, ctypes.POINTER(c_void_p), c_size_t, c_void_p]),
        "phasealloc_restore": (c_int, [c_int, ctypes.POINTER(c_void_p), c_size_t, c_void_p]),
        "phasealloc_offload_tag": (c_int, [c_int, ctypes.c_uint32, c_void_p]),
        "phasealloc_restore_tag": (c_int, [c_int, ctypes.c_uint32, c_void_p]),
        # out as above; the last: a uint64_t* for the ticket of the moves in flight
        "phasealloc_offload_start": (c_int, [c_int, ctypes.POINTER(c_void_p), c_size_t, ctypes.c_uint32, c_void_p,
                                             ctypes.POINTER(ctypes.c_uint64)]),
        "phasealloc_restore_start": (c_int, [c_int, ctypes.POINTER(c_void_p), c_size_t, ctypes.c_uint32, c_void_p,
                                             ctypes.POINTER(ctypes.c_uint64)]),
        "phasealloc_finish_moves": (c_int, [c_int, ctypes.c_uint64, c_int]),
        "phasealloc_tag_bytes": (c_size_t, [c_int, ctypes.c_uint32]),
        "phasealloc_offload_kind": (c_int, [c_int]),
        "phasealloc_move_lent": (c_int, [c_int, c_int, c_int, ctypes.POINTER(c_void_p), c_size_t, ctypes.POINTER(c_void_p),
                                         ctypes.POINTER(c_size_t), c_size_t, c_void_p, ctypes.POINTER(ctypes.c_uint64)]),
        "phasealloc_order_after_moves": (c_int, [c_int, ctypes.c_uint64, c_void_p]),
        "phasealloc_tag_id": (ctypes.c_uint32, [c_char_p]),
        "phasealloc_find_tag": (ctypes.c_uint32, [c_char_p]),
        "phasealloc_set_thread_tag": (ctypes.c_uint32, [ctypes.c_uint32]),
        "phasealloc_set_pressure_handler": (None, [PRESSURE_HANDLER]),
        "phasealloc_last_error": (c_char_p, []),
        "phasealloc_clear_last_error": (None, []),
    }
    for name, (restype, argtypes) in prototypes.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def load(path=None):
    """Loads the library (once) and returns the ctypes handle. Raises OSError when it is missing."""
    global _lib, _path
    with _lock:
        if _lib is not None:
            if path is not None and os.path.abspath(path) != _path:
                raise PhaseallocError(
                    "phasealloc: %s is already loaded; cannot load %s too" % (_path, path))
            return _lib
        chosen = os.path.abspath(path) if path is not None else library_path()
        if not os.path.exists(chosen):
            raise OSError(
                "phasealloc: %s not found (build it, install it, or point PHASEALLOC_LIBRARY at "
                "libphasealloc_torch.so)" % chosen)
        lib = ctypes.CDLL(chosen)
        _declare(lib)
        _lib, _path = lib, chosen
        return lib


def loaded():
    """The ctypes handle if the library was loaded, else None (never loads)."""
    return _lib


def last_error():
    lib = loaded()
    if lib is None:
        return ""
    return (lib.phasealloc_last_error() or b"").decode("utf-8", "replace")


def check(status, what):
    """Raises PhaseallocError with the last error when a C call returned -1."""
    if status != 0:
        raise PhaseallocError("%s failed: %s" % (what, last_error()))


def text(value, what):
    """Decodes a returned C string; NULL raises PhaseallocError with the last error."""
    if value is None:
        raise PhaseallocError("%s failed: %s" % (what, last_error()))
    return value.decode("utf-8", "replace")


def json_call(fn, arg, what):
    return json.loads(text(fn(arg), what))


def function_address(name):
    """The address of an exported C function (what torch's hook setters take)."""
    lib = load()
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
