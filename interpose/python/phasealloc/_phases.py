"""Explicit phases: `with phasealloc.phase("generation"):` and `@phasealloc.phase("training")`.

Phases are process-wide (the library applies a transition to every GPU's engine). Explicit phases
nest (a stack in the library) and override detection: while one is active, the detection hooks
in _phase_detect do nothing.

Without the library loaded (phasealloc not enabled), phase() is a cheap no-op, so code annotated
with phases runs unchanged without phasealloc.
"""

import contextlib
import threading

from . import _library

_lock = threading.Lock()
_explicit_depth = 0
_changes = 0  # explicit transitions so far: detection re-asserts its phase after one
_listeners = []  # callables told the current phase after each explicit transition (add_listener)


def add_listener(callback):
    """Calls callback(name) with the phase that is current after each explicit transition
    (phase() entered or left, set_phase); detection tells its own observers (_phase_detect)."""
    _listeners.append(callback)


def remove_listener(callback):
    _listeners.remove(callback)


def _tell_listeners():
    if _listeners:
        name = current_phase()
        for callback in list(_listeners):
            callback(name)


def changes():
    return _changes


def explicit_depth():
    """How many explicit phases are active (detection is off while > 0)."""
    return _explicit_depth


def _begin(name):
    global _explicit_depth, _changes
    lib = _library.loaded()
    with _lock:
        if lib is not None:
            _library.check(lib.phasealloc_phase_begin(name.encode()), "phasealloc.phase(%r)" % name)
        _explicit_depth += 1
        _changes += 1
    _tell_listeners()


def _end(name):
    global _explicit_depth, _changes
    lib = _library.loaded()
    with _lock:
        _explicit_depth = max(0, _explicit_depth - 1)
        _changes += 1
        if lib is not None:
            _library.check(lib.phasealloc_phase_end(), "end of phasealloc.phase(%r)" % name)
    _tell_listeners()


class phase(contextlib.ContextDecorator):
    """A named phase, as a context manager or a decorator.

        with phasealloc.phase("generation"):
            model.generate(...)

        @phasealloc.phase("training")
        def train_step(batch): ...
    """

    def __init__(self, name):
        if not isinstance(name, str) or not name:
            raise ValueError("phasealloc.phase needs a non-empty name, got %r" % (name,))
        self.name = name

    def __enter__(self):
        _begin(self.name)
        return self

    def __exit__(self, exc_type, exc, tb):
        _end(self.name)
        return False

    def __repr__(self):
        return "phasealloc.phase(%r)" % self.name


def current_phase():
    """The current phase name ("unphased" before any; "" when the library is not loaded)."""
    lib = _library.loaded()
    if lib is None:
        return ""
    return _library.text(lib.phasealloc_current_phase(), "phasealloc.current_phase")


def set_phase(name):
    """Replaces the current phase without nesting (the next detection point sets its own again)."""
    global _changes
    _set(name)
    _changes += 1
    _tell_listeners()


def _set(name):
    """set_phase for detection (does not count as an explicit change)."""
    lib = _library.loaded()
    if lib is not None:
        _library.check(lib.phasealloc_phase_set(name.encode()), "phasealloc.set_phase(%r)" % name)
