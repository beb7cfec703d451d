"""Triton kernels computed at values:exact: each launch of a `@triton.jit` kernel on simcuda, the
simulated GPU, is also run by Triton's own interpreter on the CPU, straight into device memory.
Installed by torch_adapt when `triton` is imported and simcuda's value level is exact.

Rationale: the value mode (values.py) sees operations that pass through PyTorch's dispatcher. A
Triton kernel launched from Python does not: its launch reaches simcuda, which skips it, so its
outputs are whatever the memory held. vLLM's model runner builds every step's inputs that way
(positions, sequence lengths, slot mappings, block tables, the sampler's ids), so at exact its
attention read garbage positions and no generation could be compared with a reference. Triton ships
an interpreter (what TRITON_INTERPRET=1 selects at decoration time) that runs a kernel's Python body
program by program on NumPy arrays, reading and writing memory through raw pointers; simcuda's device
memory is host memory, so the interpreter can run on the very bytes the launch was given.

Approach: `JITFunction.run` is wrapped. The launch runs first as the wheel runs it (compiled by
Triton's ptxas on the CPU, launched on simcuda, skipped: its allocations, streams and launches
unchanged). Then, unless the launch was a warm-up or work captured into a CUDA graph, the kernel's
arguments are bound the way Triton binds them (defaults and the autotuner's chosen meta-parameters
included), the grid is evaluated on them, CUDA tensors become CPU aliases of their device bytes
(values.cpu_alias: no copy, no CUDA call), and Triton's interpreter runs the grid on them (without
the host copies it makes of device arguments, since these are host memory already). While it runs,
a `@triton.jit` helper the kernel calls is interpreted too. Launch options (num_warps,
num_stages, ...) do not reach the interpreter: they change speed, not values.

Limitations: the interpreter runs each program in Python, so a kernel with a large grid costs
seconds where the GPU takes microseconds; exact is the level for small models. A kernel it cannot
run (an intrinsic it has no NumPy form of, inline PTX) is named once on stderr and its outputs stay
what the memory held. Kernels of torch.compile do not pass through `JITFunction.run` (Inductor
launches its compiled binaries itself) and are not computed; neither is a kernel replayed from a
CUDA graph.
"""

import functools
import inspect
import threading

from . import values

_named_once = set()
_state = threading.local()


def _bound_arguments(kernel, args, kwargs):
    """The kernel's parameters as Triton binds them: positional and keyword arguments, meta-parameters
    an autotuner or heuristic added, defaults; launch options dropped."""
    signature = inspect.signature(kernel.fn)
    accepted = {k: v for k, v in kwargs.items() if k in signature.parameters}
    bound = signature.bind(*args, **accepted)
    bound.apply_defaults()
    return dict(bound.arguments)


def _on_cpu(value):
    import torch

    if isinstance(value, torch.Tensor) and value.device.type == "cuda":
        return values.cpu_alias(value)
    if type(value) is tuple:  # a named tuple or other subclass is left as it is
        return tuple(_on_cpu(v) for v in value)
    return value


class _helpers_interpreted:
    """While a kernel is interpreted, a `@triton.jit` function it calls runs interpreted as well (its
    JITFunction would refuse a call outside compilation). Triton's own InterpretedFunction.__call__
    patches triton.language for the helper and never restores it (under TRITON_INTERPRET=1 nothing
    is compiled afterwards); here kernels are compiled after, so the helper's patches are undone
    when it returns."""

    def __init__(self, jit_function, interpreter):
        self.cls = jit_function
        self.interpreter = interpreter

    def __enter__(self):
        self.saved = self.cls.__call__
        interpreter = self.interpreter

        def call(helper, *args, **kwargs):
            scope = interpreter._patch_lang(helper.fn)
            try:
                return interpreter.InterpretedFunction(helper.fn).rewrite()(*args, **kwargs)
            finally:
                scope.restore()

        self.cls.__call__ = call

    def __exit__(self, *exc):
        self.cls.__call__ = self.saved


@functools.cache
def _in_place(interpreter):
    """Triton's GridExecutor, minus its copies: it copies each tensor argument's whole storage to the
    host and back around the run, where the arguments here are already host memory (aliases)."""

    class executor(interpreter.GridExecutor):
        def _init_args_hst(self, args_dev, kwargs):
            return args_dev, kwargs

        def _restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
            pass

    return executor


class _loops_over_tensors:
    """The interpreter's `tl.range` yields Python ints, where compiled Triton's loop variable is an
    int32 scalar tensor (vLLM's samplers call `row_id.to(tl.int64)` on it): while a kernel is
    interpreted, `tl.range` yields scalar tensors (`tl.static_range` keeps ints, as compiled)."""

    def __init__(self, interpreter):
        self.interpreter = interpreter

    def __enter__(self):
        interpreter = self.interpreter
        self.saved = original = interpreter._patch_lang
        import operator
        import triton.language as tl

        def loop(arg1, arg2=None, step=None, **kwargs):
            start, end = (0, arg1) if arg2 is None else (arg1, arg2)
            indices = range(operator.index(start), operator.index(end), operator.index(step or 1))
            return (interpreter._implicit_cvt(i) for i in indices)

        def patch_lang(fn):
            scope = original(fn)
            scope.set_attr(tl, "range", loop)
            return scope

        interpreter._patch_lang = patch_lang

    def __exit__(self, *exc):
        self.interpreter._patch_lang = self.saved


def _interpret(jit_function, interpreter, kernel, args, kwargs, grid):
    arguments = _bound_arguments(kernel, args, kwargs)
    if callable(grid):
        grid = grid(arguments)
    grid = tuple(int(g) for g in grid)
    if 0 in grid:
        return
    on_cpu = {name: _on_cpu(value) for name, value in arguments.items()}
    interpreted = interpreter.InterpretedFunction(kernel.fn)
    with _loops_over_tensors(interpreter), _helpers_interpreted(jit_function, interpreter):
        _in_place(interpreter)(interpreted.rewrite(), interpreted.arg_names, grid)(**on_cpu)


def install():
    """Wraps Triton's JITFunction.run (idempotent); torch_adapt calls it once triton is imported."""
    import torch
    from triton.runtime import interpreter, jit

    jit_function = jit.JITFunction
    if getattr(jit_function.run, "_simcuda_values", False):
        return
    launch = jit_function.run

    def run(kernel, *args, grid, warmup, **kwargs):
        compiled = launch(kernel, *args, grid=grid, warmup=warmup, **kwargs)
        if warmup or compiled is None or getattr(_state, "busy", False) or torch.cuda.is_current_stream_capturing():
            return compiled
        _state.busy = True
        try:
            torch.cuda.current_stream().synchronize()  # the kernel's inputs, copied before it, are in place
            _interpret(jit_function, interpreter, kernel, args, kwargs, grid)
        except Exception as exc:
            name = getattr(kernel, "__name__", repr(kernel))
            if name not in _named_once:
                _named_once.add(name)
                values._say("Triton kernel %s was not computed (%s: %s): its outputs are what the memory held" %
                     (name, type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else ""))
        finally:
            _state.busy = False
        return compiled

    run._simcuda_values = True
    jit_function.run = run
