"""Automatic same-address offload (PHASEALLOC_CONF offload:auto): idle state leaves the GPU when a
phase that does not use it begins, and is back when a phase that does begins.

Rationale: in RLHF much of what is live is idle in any one phase: Adam's state outside step(), a
frozen reference or reward model outside its forwards. phasealloc already detects the phases; the
mechanism (phasealloc.offload / restore) keeps every address, so a wrong guess costs time over the
link, never a crash or a wrong value.

Approach:
  - Classes of idle state, found through the hooks phase detection already has: the state of each
    torch.optim optimizer (touched in its step()), and each frozen model (a module called as the
    outermost module of a forward whose parameters all have requires_grad False, or that runs
    without grad: its parameters and buffers), unless an optimizer trains any of its parameters
    (checked at each decision: the policy model also runs without grad, inside generate()). A
    class is known from its first touch.
  - A schedule learned from what the job does (its phases, detected or set with phasealloc.phase): each phase's set of classes touched in any interval
    of it so far. At a transition into a phase seen before, every class it never touched leaves,
    and every offloaded class it touched comes back (prefetch, before the first touch). A phase
    never seen before changes nothing: the first step only learns.
  - On demand: the optimizer step pre-hook and the frozen model's forward pre-hook restore their
    class if it is away (a wrong prediction, or a phase the schedule had not seen use it).
  - Nothing breaks when a guess is wrong: an offloaded tensor still reads and writes right, slowly.
Limitations:
  - The trainer's own weights and gradients, and user tags, are not classes yet.
  - The copies run synchronously at the transition (the mechanism's calls return when they are
    done): the step pays for them instead of overlapping them with compute.
"""

import importlib
import threading
import warnings
import weakref

from . import _phase_detect, _phases

_lock = threading.RLock()
_classes = {}        # key -> _idle_class
_touched = {}        # phase -> set of class keys touched in any interval of it
_phase = None        # the phase the schedule is in
_depth = threading.local()
_handles = []
_optimizers = weakref.WeakSet()  # every optimizer that stepped: their parameters are trained
_trained_ids = set()             # ids of those parameters, as of the last step
_disabled_reason = None
counts = {"offloads": 0, "restores": 0, "on_demand": 0, "restore_ooms": 0, "page_bytes": 0, "copied_bytes": 0,
          "kept_bytes": 0}


class _idle_class:
    def __init__(self, key, kind, owner, tensors):
        self.key = key
        self.kind = kind              # "optimizer" or "frozen"
        self.owner = weakref.ref(owner)
        self.tensors = tensors        # callable: the owner's CUDA tensors now
        self.away = False

    def live_tensors(self):
        owner = self.owner()
        return [] if owner is None else [t for t in self.tensors(owner) if getattr(t, "is_cuda", False)]


def _optimizer_tensors(optimizer):
    out = []
    for state in optimizer.state.values():
        for value in state.values():
            if hasattr(value, "is_cuda"):
                out.append(value)
    return out


def _module_tensors(module):
    return list(module.parameters()) + list(module.buffers())


def _by_device(tensors):
    groups = {}
    for t in tensors:
        groups.setdefault(t.device.index, []).append(t)
    return groups


def _move(cls, offload):
    """Offloads or restores one class; a failure is a warning, never the job's error."""
    global _disabled_reason
    from . import _same_address

    tensors = cls.live_tensors()
    if not tensors:
        cls.away = False
        return
    try:
        for device, group in _by_device(tensors).items():
            done = (_same_address.offload_ours if offload else _same_address.restore_ours)(group, device=device)
            for key in ("page_bytes", "copied_bytes", "kept_bytes"):
                counts[key] += done[key]
    except _same_address.OffloadOutOfMemory:
        counts["restore_ooms"] += 1  # stays on the host, correct; the next transition tries again
        return
    except Exception as exc:  # noqa: BLE001 (a device without host backing, a budget: stop, say so once)
        _disabled_reason = str(exc)
        warnings.warn("phasealloc: offload:auto stops: %s" % exc, RuntimeWarning, stacklevel=3)
        return
    cls.away = offload
    counts["offloads" if offload else "restores"] += 1


def _touch(key, kind, owner, tensors):
    """Records that the current phase uses class `key`, and brings it back if it is away."""
    with _lock:
        cls = _classes.get(key)
        if cls is None:
            if _is_trained(kind, owner):
                return  # the model a trainer trains: in use in most phases, never a class
            cls = _idle_class(key, kind, owner, tensors)
            if not cls.live_tensors():
                return  # nothing on a GPU (a model or an optimizer on the CPU): not a class
            _classes[key] = cls
        if _phase is not None:
            _touched.setdefault(_phase, set()).add(key)
        if cls.away and _disabled_reason is None:
            counts["on_demand"] += 1
            _move(cls, offload=False)


def _on_phase(name):
    """A transition: learn, then offload what the new phase never used and bring back what it did."""
    global _phase
    with _lock:
        _phase = name
        if _disabled_reason is not None or name not in _touched:
            _touched.setdefault(name, set())
            return
        used = _touched[name]
        for key in list(_classes):
            cls = _classes[key]
            if cls.owner() is None or _is_trained(cls.kind, cls.owner()):  # gone, or a model a trainer trains
                if cls.away:
                    _move(cls, offload=False)
                del _classes[key]
                continue
            if key in used and cls.away:
                _move(cls, offload=False)
            elif key not in used and not cls.away:
                _move(cls, offload=True)


def _step_pre_hook(optimizer, args, kwargs):
    if optimizer.state:
        _touch(("optimizer", id(optimizer)), "optimizer", optimizer, _optimizer_tensors)


def _step_post_hook(optimizer, args, kwargs):
    # The first step creates the state: known from now on, touched in this phase.
    _touch(("optimizer", id(optimizer)), "optimizer", optimizer, _optimizer_tensors)
    _optimizers.add(optimizer)
    _refresh_trained()  # once per step: param groups may have been added since


def _frozen(module):
    """A module that looks idle outside its forwards: parameters, none needing grad or run without grad."""
    import torch

    params = list(module.parameters())
    return bool(params) and (not torch.is_grad_enabled() or not any(p.requires_grad for p in params))


def _refresh_trained():
    """Notes the parameters every optimizer that stepped trains."""
    global _trained_ids
    _trained_ids = {id(p) for opt in list(_optimizers) for group in opt.param_groups for p in group["params"]}


def _is_trained(kind, owner):
    return kind == "frozen" and owner is not None and any(id(p) in _trained_ids for p in owner.parameters())


def _forward_pre_hook(module, args):
    depth = getattr(_depth, "value", 0)
    _depth.value = depth + 1
    if depth == 0 and _frozen(module):
        _touch(("frozen", id(module)), "frozen", module, _module_tensors)


def _forward_hook(module, args, output):
    _depth.value = max(0, getattr(_depth, "value", 0) - 1)


def install(torch):
    """Installs the hooks and the phase observers (detected and explicit phases; idempotent)."""
    if _handles:
        return
    optim = importlib.import_module("torch.optim.optimizer")  # by name: not an attribute in torch 2.15
    modules = importlib.import_module("torch.nn.modules.module")
    _handles.append(optim.register_optimizer_step_pre_hook(_step_pre_hook))
    _handles.append(optim.register_optimizer_step_post_hook(_step_post_hook))
    _handles.append(modules.register_module_forward_pre_hook(_forward_pre_hook))
    _handles.append(modules.register_module_forward_hook(_forward_hook, always_call=True))
    _phase_detect.add_observer(_on_phase)
    _phases.add_listener(_on_phase)
    _on_phase(_phases.current_phase())


def uninstall():
    global _phase, _disabled_reason
    while _handles:
        _handles.pop().remove()
    for remove in (_phase_detect.remove_observer, _phases.remove_listener):
        try:
            remove(_on_phase)
        except ValueError:
            pass
    with _lock:
        for cls in list(_classes.values()):
            if cls.away:
                _move(cls, offload=False)
        _classes.clear()
        _touched.clear()
        _optimizers.clear()
        _trained_ids.clear()
        _phase = None
        _disabled_reason = None


def summary():
    """What the schedule learned and did: classes, per-phase touched classes, counts."""
    with _lock:
        return {
            "classes": {"%s:%d" % (c.kind, c.key[1]): {"away": c.away} for c in _classes.values()},
            "touched": {phase: sorted("%s:%d" % key for key in keys) for phase, keys in _touched.items()},
            "counts": dict(counts),
            "disabled": _disabled_reason,
        }
