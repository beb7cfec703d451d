import collections
import functools

from ..nn.modules.module import RemovableHandle

_global_optimizer_pre_hooks = collections.OrderedDict()
_global_optimizer_post_hooks = collections.OrderedDict()
_next_id = [0]


def register_optimizer_step_pre_hook(hook):
    _next_id[0] += 1
    _global_optimizer_pre_hooks[_next_id[0]] = hook
    return RemovableHandle(_global_optimizer_pre_hooks, _next_id[0])


def register_optimizer_step_post_hook(hook):
    _next_id[0] += 1
    _global_optimizer_post_hooks[_next_id[0]] = hook
    return RemovableHandle(_global_optimizer_post_hooks, _next_id[0])


def _with_hooks(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for hook in list(_global_optimizer_pre_hooks.values()):
            hook(self, args, kwargs)
        out = step(self, *args, **kwargs)
        for hook in list(_global_optimizer_post_hooks.values()):
            hook(self, args, kwargs)
        return out
    return wrapper


class Optimizer:
    """Like torch: every subclass's step runs the global step hooks around it."""

    def __init__(self, params=(), defaults=None):
        self.steps = 0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_hooks(cls.__dict__["step"])

    def step(self, closure=None):
        raise NotImplementedError
