"""A ctypes view of libsimcuda.so's C introspection API (include/simcuda/introspect.h), for the
process the simulator runs in: the libraries `phasealloc-run --sim-gpu` preloaded, or those in
PHASEALLOC_SIMCUDA_DIR."""

import ctypes
import os

_lib = None


def loaded():
    """Whether simcuda runs this process (its libraries are preloaded or were loaded by name)."""
    return _library(required=False) is not None


def _library(required=True):
    global _lib
    if _lib is not None:
        return _lib
    candidates = [None]  # the process's global symbols: the preloaded stand-ins bring libsimcuda.so
    folder = os.environ.get("PHASEALLOC_SIMCUDA_DIR")
    if folder:
        candidates.append(os.path.join(folder, "libsimcuda.so"))
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
            lib.simcuda_get_counters  # noqa: B018 (raises AttributeError where simcuda is absent)
        except (OSError, AttributeError):
            continue
        for function in ("simcuda_mapped_bytes", "simcuda_peak_mapped_bytes", "simcuda_take_interval_peak_mapped_bytes",
                         "simcuda_live_allocations",
                         "simcuda_capacity_bytes", "simcuda_nccl_bytes", "simcuda_peak_nccl_bytes",
                         "simcuda_host_located_bytes", "simcuda_peak_host_located_bytes",
                         "simcuda_pinned_host_bytes"):
            getattr(lib, function).restype = ctypes.c_size_t
        lib.simcuda_value_level.restype = ctypes.c_char_p
        lib.simcuda_quiet.restype = ctypes.c_int
        lib.simcuda_nccl_virtual_peers.restype = ctypes.c_int
        lib.simcuda_pointer_range.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                              ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
        _lib = lib
        return lib
    if required:
        raise RuntimeError("simcuda is not loaded in this process (run it under phasealloc-run --sim-gpu, or set "
                           "PHASEALLOC_SIMCUDA_DIR)")
    return None


def value_level():
    """The value level simcuda was configured with (SIMCUDA_GPU values:LEVEL, or its default); simcuda
    parses SIMCUDA_GPU and refuses a bad level itself. 'off' where simcuda is not loaded."""
    lib = _library(required=False)
    return lib.simcuda_value_level().decode() if lib is not None else "off"


def quiet():
    """Whether SIMCUDA_GPU asked for no start-up lines (quiet:1)."""
    lib = _library(required=False)
    return lib is not None and lib.simcuda_quiet() == 1


def virtual_peers():
    """Whether SIMCUDA_GPU asked for nccl_peers:virtual: this process is one rank of a job whose other
    ranks do not run (the dry run's --world-size)."""
    lib = _library(required=False)
    return lib is not None and lib.simcuda_nccl_virtual_peers() == 1


def simulated_bytes():
    """The memory of all simulated GPUs together."""
    lib = _library()
    return lib.simcuda_capacity_bytes() * lib.simcuda_device_count()


class simulator:
    """The simulator's books for this process: counters, mapped bytes, live allocations, pointer ranges."""

    FIELDS = ("kernel_launches", "library_calls", "memcpy_calls", "memcpy_bytes", "memset_calls",
              "device_mallocs", "device_frees", "vmm_creates", "vmm_maps", "vmm_unmaps", "unemulated_calls",
              "out_of_memory", "fat_binaries", "functions_registered", "stream_waits")

    def __init__(self):
        self.lib = _library()

    def counters(self):
        raw = (ctypes.c_uint64 * len(self.FIELDS))()
        assert self.lib.simcuda_get_counters(raw, ctypes.sizeof(raw)) == 0
        return dict(zip(self.FIELDS, raw))

    def mapped(self, device=0):
        return self.lib.simcuda_mapped_bytes(device)

    def peak_mapped(self, device=0):
        return self.lib.simcuda_peak_mapped_bytes(device)

    def take_interval_peak_mapped(self, device=0):
        """The peak of the mapped bytes since the previous call (since start for the first); the next
        interval starts now. peak_mapped() is unaffected."""
        return self.lib.simcuda_take_interval_peak_mapped_bytes(device)

    def nccl(self, device=0):
        """NCCL's own buffers on the device now (its memory model, outside PyTorch's allocator)."""
        return self.lib.simcuda_nccl_bytes(device)

    def peak_nccl(self, device=0):
        return self.lib.simcuda_peak_nccl_bytes(device)

    def host_located(self):
        """Host memory behind host-located VMM handles (mapped at device addresses, outside every
        device's capacity): what same-address offload holds on the host."""
        return self.lib.simcuda_host_located_bytes()

    def peak_host_located(self):
        return self.lib.simcuda_peak_host_located_bytes()

    def pinned_host(self):
        """Page-locked host memory (cudaHostAlloc / cuMemHostAlloc) not yet freed."""
        return self.lib.simcuda_pinned_host_bytes()

    def live_allocations(self, device=0):
        return self.lib.simcuda_live_allocations(device)

    def pointer_range(self, address):
        base, size, device = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_int()
        kind = self.lib.simcuda_pointer_range(address, ctypes.byref(base), ctypes.byref(size), ctypes.byref(device))
        return kind, base.value or 0, size.value, device.value
