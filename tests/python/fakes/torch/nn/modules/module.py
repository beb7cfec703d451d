import collections

_global_forward_pre_hooks = collections.OrderedDict()
_next_id = [0]


class RemovableHandle:
    def __init__(self, hooks, key):
        self._hooks, self._key = hooks, key

    def remove(self):
        self._hooks.pop(self._key, None)


def register_module_forward_pre_hook(hook):
    _next_id[0] += 1
    _global_forward_pre_hooks[_next_id[0]] = hook
    return RemovableHandle(_global_forward_pre_hooks, _next_id[0])


class Module:
    training = True

    def __call__(self, *args, **kwargs):
        for hook in list(_global_forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return None
