"""Choosing how phasealloc becomes torch's CUDA allocator: the c10 bridge, or CUDAPluggableAllocator.

Rationale: the c10 bridge (libphasealloc_c10.so, interpose/c10/) is a full c10 CUDAAllocator: with
it, torch.cuda.MemPool / use_mem_pool, CUDA graph capture, torch.compile's cudagraph trees,
torch.cuda.memory_stats(), torch.accelerator.memory_*, memory_snapshot() with history and OOM
observers work through PyTorch's own code (private pools are served by PyTorch's native allocator,
kept alongside). It is compiled against one torch version's class layout, so it is used only when
the running torch is that version. Otherwise phasealloc goes through CUDAPluggableAllocator, which
allows malloc and free only; _torch_api and _limits then fill in and fence off the rest.
CUDA IPC export of a storage phasealloc holds moves it to PyTorch's allocator first (one copy).

PHASEALLOC_BRIDGE=pluggable forces CUDAPluggableAllocator (comparisons, debugging);
PHASEALLOC_BRIDGE=c10 makes a missing or mismatched bridge an error instead of a fallback.
"""

import ctypes
import functools
import os
import re

BRIDGE_NAME = "libphasealloc_c10.so"

_handle = None


class BridgeUnavailable(Exception):
    """Why the c10 bridge cannot serve this process (the message says it)."""


def mode():
    value = os.environ.get("PHASEALLOC_BRIDGE", "auto").strip().lower() or "auto"
    if value not in ("auto", "c10", "pluggable"):
        raise ValueError("phasealloc: PHASEALLOC_BRIDGE=%r: expected auto, c10 or pluggable" % value)
    return value


def bridge_path(library_path):
    """The bridge beside libphasealloc_torch.so (PHASEALLOC_C10_LIBRARY overrides)."""
    env = os.environ.get("PHASEALLOC_C10_LIBRARY")
    if env:
        return os.path.abspath(env)
    return os.path.join(os.path.dirname(library_path), BRIDGE_NAME)


def install(torch, library_path):
    """Makes the bridge torch's CUDA allocator. Raises BridgeUnavailable (nothing changed) when the
    bridge is absent, was built for another torch, or refuses; the library must be loaded already
    (the bridge links to the instance this process loaded, found by its soname)."""
    global _handle
    path = bridge_path(library_path)
    if not os.path.exists(path):
        raise BridgeUnavailable("%s not found (built only when the build saw a torch install)" % path)
    try:
        handle = ctypes.CDLL(path)
    except OSError as exc:
        raise BridgeUnavailable("%s did not load: %s" % (path, exc))
    handle.phasealloc_c10_build_identity.restype = ctypes.c_char_p
    handle.phasealloc_c10_install.restype = ctypes.c_char_p
    handle.phasealloc_c10_install.argtypes = [ctypes.c_char_p]
    built_for = _fields(handle.phasealloc_c10_build_identity().decode())
    running = running_identity(torch)
    for key in ("version", "git", "cuda", "abi"):
        if built_for.get(key) != running[key]:
            raise BridgeUnavailable("%s was built for torch %s=%s, this is torch %s=%s" % (
                path, key, built_for.get(key), key, running[key]))
    error = handle.phasealloc_c10_install(";".join("%s=%s" % (k, running[k]) for k in ("version", "git", "cuda",
                                                                                         "abi")).encode())
    if error is not None:
        raise BridgeUnavailable(error.decode("utf-8", "replace"))
    _handle = handle
    _wrap_share_cuda(torch, handle)
    _wrap_allocator_settings(torch, handle)


def _fields(identity):
    return dict(part.split("=", 1) for part in identity.split(";") if "=" in part)


def running_identity(torch):
    """The running torch build, in the fields the bridge was compiled against: a bridge built for
    another version, commit, CUDA major or C++ ABI has another class layout."""
    cuda = torch.version.cuda or ""
    return {
        "version": str(torch.__version__),
        "git": str(getattr(torch.version, "git_version", "")),
        "cuda": cuda.split(".")[0],
        "abi": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
    }


def _wrap_share_cuda(torch, handle):
    """CUDA IPC export: a storage phasealloc holds moves to PyTorch's allocator before PyTorch
    exports it (interpose/c10/ipc_rehome.cpp); every export (torch.multiprocessing, reduce_tensor)
    goes through UntypedStorage._share_cuda_."""
    rehome = handle.phasealloc_c10_rehome_storage
    rehome.restype = ctypes.c_char_p
    rehome.argtypes = [ctypes.c_void_p]
    original = torch.UntypedStorage._share_cuda_

    @functools.wraps(original)
    def _share_cuda_(self, *args, **kwargs):
        error = rehome(self._cdata)
        if error is not None:
            raise RuntimeError("phasealloc: could not move the storage to PyTorch's allocator for CUDA IPC "
                               "export: %s" % error.decode("utf-8", "replace"))
        return original(self, *args, **kwargs)

    torch.UntypedStorage._share_cuda_ = _share_cuda_


_BACKEND_KEY = re.compile(r"(?:^|,)\s*backend\s*:\s*([A-Za-z_]+)")


# The variables PyTorch 2.11 to 2.15 read its CUDA allocator's settings from, in its order: the first
# one set (even to "") is the whole configuration, the others are not read. CUDAAllocatorConfig (the
# backend, per_process_memory_fraction, ...) reads PYTORCH_CUDA_ALLOC_CONF then PYTORCH_ALLOC_CONF
# (PYTORCH_HIP_ALLOC_CONF between them on ROCm builds only); the device-generic
# AcceleratorAllocatorConfig reads the same two, with PYTORCH_HIP_ALLOC_CONF between them on every build.
TORCH_ALLOC_CONF_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def torch_alloc_conf(environ=None):
    """(variable, settings) of the variable PyTorch takes its CUDA allocator settings from, or
    (None, None) when none is set."""
    environ = os.environ if environ is None else environ
    for variable in TORCH_ALLOC_CONF_VARIABLES:
        value = environ.get(variable)
        if value is not None:
            return variable, value
    return None, None


def backend_named(settings):
    """The allocator backend a PYTORCH_CUDA_ALLOC_CONF-style string names, or None."""
    match = _BACKEND_KEY.search(settings)
    return match.group(1) if match else None


def _wrap_allocator_settings(torch, handle):
    """torch.cuda.memory._set_allocator_settings("backend:...") at run time: PyTorch refuses any
    backend other than the one it started with, with an internal assert ("Allocator backend parsed at
    runtime != allocator backend parsed at load time, please report a bug"). Under the bridge that
    backend is phasealloc, so the refusal says so plainly instead. Settings PyTorch refuses may have
    reset its roundup_power2_divisions all the same: the bridge reads them again
    (interpose/c10/runtime_settings.hpp)."""
    original = torch.cuda.memory._set_allocator_settings
    follow = handle.phasealloc_c10_follow_allocator_settings
    follow.restype = ctypes.c_char_p
    follow.argtypes = []

    @functools.wraps(original)
    def _set_allocator_settings(env):
        backend = backend_named(env)
        if backend not in (None, "phasealloc"):
            how = ("start the process without phasealloc (PHASEALLOC=0)" if backend == "native" else
                   "set backend:%s in PYTORCH_CUDA_ALLOC_CONF before the process starts (phasealloc then stays "
                   "out of the way)" % backend)
            raise RuntimeError(
                "phasealloc: _set_allocator_settings(%r): this process's CUDA allocator backend is phasealloc, and "
                "PyTorch cannot change the backend at run time; to use PyTorch's %r backend, %s"
                % (env, backend, how))
        try:
            return original(env)
        except Exception:
            error = follow()
            if error is not None:
                raise RuntimeError("phasealloc: %s" % error.decode("utf-8", "replace"))
            raise

    torch.cuda.memory._set_allocator_settings = _set_allocator_settings


def active():
    """Whether the bridge is this process's CUDA allocator."""
    return _handle is not None
