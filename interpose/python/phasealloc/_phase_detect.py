"""Phase detection: sets the phase from what the program is doing, when no explicit phase is active.

Rationale: most RLHF code has no phasealloc annotations; the calls it makes say which phase it is
in. Approach: detected phases are sticky (phase_set: the phase stays until the next detection
point), so memory allocated between two points (a loss after a forward, zero_grad after a step) is
attributed to the phase it belongs to, and no end hook is needed (an exception cannot leave a
phase half open).

  detection point                                    phase
  transformers GenerationMixin.generate              generation  (for the whole call)
  vllm LLM.generate / LLM.chat                       generation  (for the whole call)
  vllm LLM.wake_up                                   generation  (set before the call)
  vllm LLM.sleep                                     sleep       (set after the call)
  torch.autograd.backward, torch.Tensor.backward     training    (for the whole call)
  torch.optim Optimizer.step (global step pre-hook)  optimizer
  nn.Module forward, grad enabled (global pre-hook)  training
  nn.Module forward, no_grad / inference_mode        inference

"For the whole call": module forwards inside generate() or backward() (activation checkpointing)
do not change the phase. Explicit phases (phasealloc.phase) override detection: while one is
active every hook does nothing.

transformers and vLLM are wrapped when they are imported (a post-import hook, _import_hooks), never
imported from here, so a program that does not use them pays nothing. install() is idempotent and
uninstall() restores every wrapped attribute and removes every hook.
Observers (add_observer) are told every phase detection sets, with or without phasealloc as the
allocator: a measuring harness sees the phases phasealloc would see under PyTorch's allocator too
(install() the hooks, add an observer; PHASEALLOC unset).
Limitations: a model class that overrides generate() without calling GenerationMixin.generate is
seen only through its forwards (inference). The global forward pre-hook costs one Python call per
module forward; enable(detect_phases=False) or PHASEALLOC_DETECT=0 turns detection off.
"""

import functools
import importlib
import sys
import threading

from . import _import_hooks, _phases

_state = threading.local()
_lock = threading.Lock()
_detected = None          # the phase detection last set (None: none yet)
_seen_changes = -1        # _phases.changes() when detection last set it
_restore = []             # (owner, attribute, original)
_handles = []             # hook handles with .remove()
_import_callbacks = []    # (module name, callback)
_observers = []           # callback(phase name), told each phase detection sets
_installed = False


def _scope_depth():
    return getattr(_state, "depth", 0)


def detect(name):
    """Sets `name` as the detected phase, unless an explicit phase is active. Cheap when it is
    already the phase detection set and no explicit transition happened since."""
    global _detected, _seen_changes
    if _phases.explicit_depth() or (name == _detected and _phases.changes() == _seen_changes):
        return
    with _lock:
        _phases._set(name)
        _detected = name
        _seen_changes = _phases.changes()
        observers = list(_observers)
    for observer in observers:
        observer(name)


def add_observer(callback):
    """Calls callback(name) each time detection sets a phase (after it is set)."""
    with _lock:
        _observers.append(callback)


def remove_observer(callback):
    with _lock:
        _observers.remove(callback)


def _reset_detected():
    global _detected, _seen_changes
    _detected = None
    _seen_changes = -1


def _scoped(name, original):
    """Runs `original` in phase `name`; detection inside it is off."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if _phases.explicit_depth() or _scope_depth():
            return original(*args, **kwargs)
        detect(name)
        _state.depth = _scope_depth() + 1
        try:
            return original(*args, **kwargs)
        finally:
            _state.depth = _scope_depth() - 1
    return wrapper


def _before(name, original):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if not _scope_depth():
            detect(name)
        return original(*args, **kwargs)
    return wrapper


def _after(name, original):
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        if not _scope_depth():
            detect(name)
        return result
    return wrapper


def _wrap(owner, attribute, make):
    original = owner.__dict__.get(attribute) if isinstance(owner, type) else getattr(owner, attribute, None)
    if original is None or getattr(original, "__phasealloc_original__", None) is not None:
        return
    wrapper = make(original)
    wrapper.__phasealloc_original__ = original
    setattr(owner, attribute, wrapper)
    _restore.append((owner, attribute, original))


# --- torch ---------------------------------------------------------------------------------------

def _forward_pre_hook(module, args):
    if _phases.explicit_depth() or _scope_depth():
        return None
    torch = sys.modules["torch"]
    detect("training" if torch.is_grad_enabled() else "inference")
    return None


def _optimizer_step_pre_hook(optimizer, args, kwargs):
    if not _phases.explicit_depth():
        detect("optimizer")
    return None


def _install_torch(torch):
    autograd = getattr(torch, "autograd", None)
    if autograd is not None:
        _wrap(autograd, "backward", lambda f: _scoped("training", f))
    tensor = getattr(torch, "Tensor", None)
    if tensor is not None:
        _wrap(tensor, "backward", lambda f: _scoped("training", f))
    # By module name: torch 2.15 no longer keeps `optimizer` as an attribute of torch.optim.
    try:
        optimizer_module = importlib.import_module("torch.optim.optimizer")
    except ImportError:
        optimizer_module = None
    register_step = getattr(optimizer_module, "register_optimizer_step_pre_hook", None)
    if register_step is not None:
        _handles.append(register_step(_optimizer_step_pre_hook))
    module_module = getattr(getattr(getattr(torch, "nn", None), "modules", None), "module", None)
    register_forward = getattr(module_module, "register_module_forward_pre_hook", None)
    if register_forward is not None:
        _handles.append(register_forward(_forward_pre_hook))


# --- transformers and vLLM, when imported --------------------------------------------------------

def _install_transformers(module):
    mixin = getattr(module, "GenerationMixin", None)
    if mixin is not None:
        _wrap(mixin, "generate", lambda f: _scoped("generation", f))


def _install_vllm(module):
    llm = getattr(module, "LLM", None)
    if llm is None:
        return
    for name in ("generate", "chat"):
        _wrap(llm, name, lambda f: _scoped("generation", f))
    _wrap(llm, "wake_up", lambda f: _before("generation", f))
    _wrap(llm, "sleep", lambda f: _after("sleep", f))


_LIBRARIES = (
    ("transformers.generation.utils", _install_transformers),
    ("vllm.entrypoints.llm", _install_vllm),
)


def install():
    """Installs every detection hook (idempotent). torch must be imported."""
    global _installed
    if _installed:
        return
    _installed = True
    _install_torch(sys.modules["torch"])
    for name, callback in _LIBRARIES:
        _import_callbacks.append((name, callback))
        _import_hooks.when_imported(name, callback)


def uninstall():
    """Removes every hook and restores every wrapped attribute."""
    global _installed
    for name, callback in _import_callbacks:
        _import_hooks.cancel(name, callback)
    del _import_callbacks[:]
    while _handles:
        _handles.pop().remove()
    while _restore:
        owner, attribute, original = _restore.pop()
        setattr(owner, attribute, original)
    _reset_detected()
    del _observers[:]
    _installed = False


def installed():
    return _installed
