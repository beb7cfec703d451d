"""What cannot work while phasealloc is the CUDA allocator through CUDAPluggableAllocator, made to
fail clearly. Installed only on that path: the c10 bridge (_bridge.py) supports all of it.

These limits come from PyTorch's CUDAPluggableAllocator (c10/cuda/CUDAPluggableAllocator.cpp: its
IPC, pool and stats entry points raise "does not yet support") and cannot be lifted from here:

  CUDA IPC of our memory       Sharing a CUDA tensor with another process (torch.multiprocessing
                               queues, reduce_tensor, vLLM/verl/OpenRLHF weight sync by CUDA IPC)
                               needs shareIpcHandle, which the pluggable allocator does not
                               implement. -> storage._share_cuda_ raises a RuntimeError that says so.
  CUDA graph private pools     Graph capture needs private-pool semantics (beginAllocateToPool /
                               releasePool with std::function and std::pair arguments: a C++ ABI
                               tied to one torch build). Without them, memory freed during capture
                               would be reused while the graph still refers to it. -> CUDAGraph
                               capture (torch.cuda.graph, make_graphed_callables) raises.
  torch.compile cudagraph      mode="reduce-overhead" captures CUDA graphs and checkpoints allocator
  trees                        state (getCheckpointState): the capture raises as above.
  cuDNN cacheInfo              cudnn.benchmark sizes its workspace with cacheInfo, which the
                               pluggable allocator does not implement (RuntimeError inside the
                               convolution; cannot be intercepted here). -> enable() warns when
                               torch.backends.cudnn.benchmark is on.
  torch.cuda.MemPool routing   use_mem_pool (vLLM sleep mode's CuMemAllocator, torch_memory_saver)
                               is not honoured: allocations stay with phasealloc. -> a warning,
                               once, since the program can go on.

install() wraps what can be intercepted (idempotent); uninstall() restores it.
"""

import functools
import sys
import warnings

_restore = []  # (owner, attribute, original)

GRAPH_MESSAGE = (
    "phasealloc: CUDA graph capture is not supported while phasealloc is the CUDA allocator "
    "(PyTorch's pluggable allocator API has no private graph pools that a separately built library can "
    "serve safely). This includes torch.compile(mode=\"reduce-overhead\") and make_graphed_callables. "
    "Run this process without PHASEALLOC=1, or use torch.compile without CUDA graphs.")

IPC_MESSAGE = (
    "phasealloc: CUDA IPC (sharing a CUDA tensor with another process: torch.multiprocessing, reduce_tensor, "
    "weight sync by CUDA IPC) is not supported for memory allocated by phasealloc: PyTorch's pluggable "
    "allocator API has no IPC handles. Share through NCCL or CPU memory, or run this process without "
    "PHASEALLOC=1.")

MEMPOOL_MESSAGE = (
    "phasealloc: torch.cuda.use_mem_pool is not honoured while phasealloc is the CUDA allocator: "
    "allocations inside it still come from phasealloc (vLLM sleep mode and torch_memory_saver cannot "
    "release them). phasealloc releases memory at phase transitions instead.")

CUDNN_MESSAGE = (
    "phasealloc: torch.backends.cudnn.benchmark is on; cuDNN's benchmark mode asks the allocator for "
    "cacheInfo, which PyTorch's pluggable allocator API does not provide, and convolutions may raise "
    "RuntimeError. Set torch.backends.cudnn.benchmark = False.")


def _wrap(owner, attribute, make_wrapper):
    original = getattr(owner, attribute, None)
    if original is None or getattr(original, "__phasealloc_original__", None) is not None:
        return
    wrapper = make_wrapper(original)
    wrapper.__phasealloc_original__ = original
    setattr(owner, attribute, wrapper)
    _restore.append((owner, attribute, original))


def _raising(message):
    def make(original):
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            raise RuntimeError(message)
        return wrapper
    return make


def _warning_once(message):
    def make(original):
        warned = []

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            if not warned:
                warned.append(True)
                warnings.warn(message, RuntimeWarning, stacklevel=2)
            return original(*args, **kwargs)
        return wrapper
    return make


def install():
    torch = sys.modules["torch"]
    cuda = torch.cuda
    graph_class = getattr(cuda, "CUDAGraph", None)
    if graph_class is not None:
        _wrap(graph_class, "capture_begin", _raising(GRAPH_MESSAGE))
    graph_context = getattr(cuda, "graph", None)
    if isinstance(graph_context, type):
        # torch.cuda.graph switches to a side stream before capture_begin: refuse before that.
        _wrap(graph_context, "__enter__", _raising(GRAPH_MESSAGE))
    storage_class = getattr(torch, "UntypedStorage", None)
    if storage_class is not None:
        _wrap(storage_class, "_share_cuda_", _raising(IPC_MESSAGE))
    for module in (cuda, getattr(cuda, "memory", None)):
        if module is not None:
            _wrap(module, "use_mem_pool", _warning_once(MEMPOOL_MESSAGE))
    cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
    if cudnn is not None and getattr(cudnn, "benchmark", False):
        warnings.warn(CUDNN_MESSAGE, RuntimeWarning, stacklevel=3)


def uninstall():
    while _restore:
        owner, attribute, original = _restore.pop()
        setattr(owner, attribute, original)
