"""A fake torch: only what phasealloc touches (see tests/python/fakes/README.md)."""

import contextlib
import os

__version__ = "0.0.0+fake"
__fake__ = True

_grad_enabled = [True]


def is_grad_enabled():
    return _grad_enabled[-1]


class _GradMode(contextlib.ContextDecorator):
    def __init__(self, enabled):
        self._enabled = enabled

    def __enter__(self):
        _grad_enabled.append(self._enabled)
        return self

    def __exit__(self, *exc):
        _grad_enabled.pop()
        return False


def no_grad():
    return _GradMode(False)


def enable_grad():
    return _GradMode(True)


def inference_mode(mode=True):
    return _GradMode(not mode)


class Tensor:
    def __init__(self, name="t"):
        self.name = name

    def backward(self, gradient=None):
        autograd.backward(self, gradient)


class UntypedStorage:
    def _share_cuda_(self):
        if cuda.memory._current_allocator is not None:
            raise RuntimeError("CUDAPluggableAllocator does not yet support shareIPcHandle. "
                               "If you need it, please file an issue describing your use case.")
        return ("handle",)


from . import autograd, backends, cuda, nn, optim  # noqa: E402

if os.environ.get("FAKE_TORCH_REPORT") == "1":
    import atexit

    @atexit.register
    def _report():
        print("FAKE_TORCH swapped=%s" % (cuda.memory._current_allocator is not None))
