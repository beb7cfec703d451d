"""Post-import hooks: run a callback when a module finishes importing, without importing it.

Rationale: enable() must run as soon as `torch` is imported (before anything initialises CUDA),
and phase detection wraps transformers / vLLM only if the program uses them: importing them just to
wrap them would cost seconds and could initialise CUDA. Approach: a sys.meta_path finder that
answers only for watched names; it asks the other finders for the real spec and wraps its loader,
whose exec_module runs the callbacks once the module body has run (the loader and spec are put
back on the module afterwards). A module already in sys.modules gets its callbacks at once.
Callbacks must not raise; if one does, the error is printed and the import goes on.
"""

import importlib.abc
import sys
import threading

_lock = threading.RLock()
_callbacks = {}  # module name -> [callback(module)]
_finder = None


def _run(name, module):
    with _lock:
        callbacks = list(_callbacks.pop(name, ()))
    for callback in callbacks:
        try:
            callback(module)
        except Exception as exc:  # a hook must never break the import
            print("phasealloc: hook for %s failed: %s: %s" % (name, type(exc).__name__, exc), file=sys.stderr)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        try:
            self._loader.exec_module(module)
        finally:
            # Put the real loader back so nothing later sees this wrapper.
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._loader
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self._loader
        _run(self._name, sys.modules.get(self._name, module))

    def __getattr__(self, attr):  # get_resource_reader, is_package, get_code, ...
        return getattr(self._loader, attr)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self):
        self._busy = set()

    def find_spec(self, fullname, path, target=None):
        if fullname not in _callbacks or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self:
                    continue
                find_spec = getattr(finder, "find_spec", None)
                if find_spec is None:
                    continue
                spec = find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, fullname)
        return spec


def when_imported(name, callback):
    """Calls callback(module) once `name` has been imported: now if it already was."""
    global _finder
    module = sys.modules.get(name)
    if module is not None and not _initialising(module):
        callback(module)
        return
    with _lock:
        _callbacks.setdefault(name, []).append(callback)
        if _finder is None:
            _finder = _Finder()
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def cancel(name, callback):
    """Forgets a callback registered with when_imported (no-op if it already ran)."""
    with _lock:
        callbacks = _callbacks.get(name)
        if callbacks and callback in callbacks:
            callbacks.remove(callback)
            if not callbacks:
                del _callbacks[name]


def _initialising(module):
    spec = getattr(module, "__spec__", None)
    return bool(getattr(spec, "_initializing", False))
