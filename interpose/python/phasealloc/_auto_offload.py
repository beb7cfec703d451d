"""Automatic same-address offload of idle state (PHASEALLOC_CONF offload:auto or offload:pressure):
with `auto`, idle state leaves the GPU when a phase that does not use it begins, and is back when a
phase that does begins; with `pressure`, it leaves only when an allocation would otherwise run out
of device memory, so a job with memory to spare moves nothing and one without takes a slower step
instead of failing.

Rationale: in RLHF much of what is live is idle in any one phase: Adam's state outside step(), a
frozen reference or reward model outside its forwards. phasealloc already detects the phases; the
mechanism (phasealloc.offload / restore) keeps every address, so a wrong guess costs time over the
link, never a crash or a wrong value.

Approach:
  - Classes of idle state, found through the hooks phase detection already has: the state of each
    torch.optim optimizer (touched in its step()); what each optimizer trains, its parameters and
    their gradients (touched in its step() and in the forwards of a model holding them: idle, for
    one, while a colocated engine generates or a reference model scores); and each frozen model (a
    module called as the outermost module of a forward whose parameters all have requires_grad
    False, or that runs without grad: its parameters and buffers), unless an optimizer trains any
    of its parameters (checked at each decision: the policy model also runs without grad, inside
    generate()). A class is known from its first touch.
  - A schedule learned from what the job does (its phases, detected or set with phasealloc.phase): each phase's set of classes touched in any interval
    of it so far. At a transition into a phase seen before, every class it never touched leaves,
    and every offloaded class it touched comes back (prefetch, before the first touch). At a phase
    never seen before, only the classes whose every use a hook brings back (frozen models, optimizer
    state) leave: a wrong guess costs one restore on demand, and the first step does not hold what
    the schedule would have sent away.
  - On demand: the optimizer step pre-hook and the frozen model's forward pre-hook restore their
    class if it is away (a wrong prediction, or a phase the schedule had not seen use it).
  - offload:pressure learns the same schedule but offloads nothing at transitions. The library calls
    back (phasealloc_set_pressure_handler) when an allocation runs out of device memory: classes the
    current phase has not touched leave, largest first, until the request's bytes are given back,
    and the allocation is tried again. At a transition, an offloaded class the new phase used before
    comes back (prefetch); a restore that finds the device full first sends the other idle classes
    away, and if it still does not fit, the class stays on the host (correct, slower). A colocated
    vLLM's wake_up maps its sleep pool with its own driver calls: before it does, what it will map
    is compared with the device's free memory, and phasealloc's cache, then the classes the phase
    has not touched, leave until it fits.
  - Nothing breaks when a guess is wrong: an offloaded tensor still reads and writes right, slowly.
    That needs host-backed mappings: on a driver that offloads by unmapping (before CUDA 12.2,
    phasealloc.offload_kind() "unmapping") a wrong guess would be an illegal address, so the first
    offload finds that out and stops offload:auto / offload:pressure, saying why, before moving
    anything; phasealloc.offload() by hand still works there.
  - User tags (phasealloc.tag) are classes too, for what no hook sees: entering a tag's block is a
    touch in the current phase, and its blocks move with offload(tag=) / restore(tag=).
Limitations:
  - A read of a trained parameter outside a forward or a step (a weight sync into an inference
    engine, a checkpoint) is not a touch: it reads over the link. So is a use of a tag's tensors
    outside a block of that tag.
  - The copies run synchronously at the transition (the mechanism's calls return when they are
    done): the step pays for them instead of overlapping them with compute.
  - Under pressure, what leaves is chosen from classes this phase has not touched so far: in the
    first interval of a phase, one it will touch later may leave and come back on demand.
"""

import functools
import importlib
import threading
import types
import warnings
import weakref

from . import _chunked_step, _import_hooks, _phase_detect, _phases

_lock = threading.RLock()
_classes = {}        # key -> _idle_class
_touched = {}        # phase -> set of class keys touched in any interval of it
_phase = None        # the phase the schedule is in
_depth = threading.local()
_handles = []
_optimizers = weakref.WeakSet()  # every optimizer that stepped: their parameters are trained
_trained_ids = set()             # ids of those parameters, as of the last step
_trained_by = {}                 # parameter id -> the optimizer that trains it, as of the last step
_disabled_reason = None
_mode = "auto"                   # "auto" or "pressure"
_pressure_handler = None         # the ctypes callback the library holds (kept alive here)
counts = {"offloads": 0, "restores": 0, "on_demand": 0, "restore_ooms": 0, "page_bytes": 0, "copied_bytes": 0,
          "kept_bytes": 0, "pressure_calls": 0, "pressure_relieved": 0, "chunked_steps": 0, "engine_wakes": 0,
          "engine_wakes_relieved": 0}
_in_chunked_step = threading.local()  # inside a chunked step: the step hooks stand aside
_wrapped_pools = []  # vLLM's CuMemAllocator, once its wake_up is wrapped (offload:pressure)


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

    def device_bytes(self, device):
        from ._same_address import plain_tensors

        return sum(t.untyped_storage().nbytes() for t in plain_tensors(self.live_tensors()) if t.device.index == device)


class _tag_class:
    """The blocks carrying a user's tag (phasealloc.tag): touched where the job enters the tag's
    block, moved with offload(tag=) / restore(tag=) on every device that has them."""

    kind = "tag"

    def __init__(self, name, number):
        self.key = ("tag", name)
        self.name = name
        self.number = number
        self.away = False

    def owner(self):
        return self  # a tag is never gone

    def device_bytes(self, device):
        from . import _library

        return _library.load().phasealloc_tag_bytes(device, self.number)

    def devices(self):
        import torch

        return [d for d in range(torch.cuda.device_count()) if self.device_bytes(d) > 0]


def _optimizer_tensors(optimizer):
    out = []
    for state in optimizer.state.values():
        for value in state.values():
            if hasattr(value, "is_cuda"):
                out.append(value)
    return out


def _trained_tensors(optimizer):
    """What an optimizer trains: its parameters and their gradients (plain tensors only: a sharded
    DTensor's storage is its framework's to move)."""
    import torch

    plain = (torch.Tensor, torch.nn.Parameter)
    out = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if type(p) in plain:
                out.append(p)
            if type(p.grad) in plain:
                out.append(p.grad)
    return out


def _module_tensors(module):
    return list(module.parameters()) + list(module.buffers())


def _by_device(tensors):
    groups = {}
    for t in tensors:
        groups.setdefault(t.device.index, []).append(t)
    return groups


def _stop(exc):
    """Stops moving anything (what is on the host stays correct there), and says why once."""
    global _disabled_reason
    _disabled_reason = str(exc)
    warnings.warn("phasealloc: offload:%s stops: %s" % (_mode, exc), RuntimeWarning, stacklevel=4)


def _stopped_where_offload_unmaps(device):
    """Stops (and answers True) where `device` offloads by unmapping: a wrong guess there would be an
    illegal address, not a slow read."""
    from . import _same_address

    if _same_address.offload_kind(device) != "unmapping":
        return False
    _stop(RuntimeError(
        "the CUDA driver of device %d cannot map host memory at device addresses (host-located cuMemCreate "
        "needs CUDA 12.2+), so an offloaded tensor that something touches before its restore (a checkpoint, "
        "a hook) would be an illegal address; nothing was moved, and phasealloc.offload() by hand still "
        "works" % device))
    return True


def _move(cls, offload):
    """Offloads or restores one class; a failure is a warning, never the job's error."""
    from . import _same_address

    if cls.kind == "tag":
        calls = [(device, None) for device in cls.devices()]
        call = _same_address.offload if offload else _same_address.restore

        def move(group, device):
            return call(tag=cls.name, device=device)
    else:
        move = _same_address.offload_ours if offload else _same_address.restore_ours
        if offload and _chunked(cls):  # a range per chunk: its step brings back one chunk at a time
            optimizer = cls.owner()
            calls = [pair for chunk in _chunked_step.chunks(optimizer)
                     for pair in _by_device(_chunked_step.state_tensors(optimizer, chunk)).items()]
        else:
            calls = list(_by_device(cls.live_tensors()).items())
    if not calls:
        cls.away = False
        return
    if offload and any(_stopped_where_offload_unmaps(device) for device, _ in calls):
        return 0
    moved = 0
    try:
        for device, group in calls:
            try:
                done = move(group, device=device)
            except _same_address.OffloadOutOfMemory:
                if offload or _mode != "pressure" or not _make_room(device, cls):
                    raise
                done = move(group, device=device)  # once more, with the room made
            for key in ("page_bytes", "copied_bytes", "kept_bytes"):
                counts[key] += done[key]
            moved += done["page_bytes"]
    except _same_address.OffloadOutOfMemory:
        counts["restore_ooms"] += 1  # stays on the host, correct; the next transition tries again
        return moved
    except Exception as exc:  # noqa: BLE001 (a device without host backing, a budget: stop, say so once)
        _stop(exc)
        return moved
    cls.away = offload
    counts["offloads" if offload else "restores"] += 1
    return moved


def _idle_now(device, keep=None):
    """Classes on `device` that the current phase has not touched (so far), resident, largest first."""
    used = _touched.get(_phase, set())
    idle = [c for key, c in _classes.items()
            if key not in used and c is not keep and not c.away and c.owner() is not None
            and not _is_trained(c.kind, c.owner())]
    sized = [(c.device_bytes(device), c) for c in idle]
    return [c for size, c in sorted(sized, key=lambda pair: -pair[0]) if size > 0]


def _offload_idle(device, enough_bytes=None, keep=None):
    """Offloads the classes the current phase has not touched (but `keep`), largest first, until
    enough_bytes of pages left (None: all of them); the bytes of pages that left."""
    freed = 0
    for cls in _idle_now(device, keep):
        freed += _move(cls, offload=True) or 0
        if enough_bytes is not None and freed >= enough_bytes:
            break
    return freed


def _install_engine_wake_hook(module):
    """vLLM's sleep-mode pool (CuMemAllocator) maps its memory again at wake_up with its own driver
    calls, outside phasealloc, so no allocation of phasealloc's runs out of memory there: the wake
    does. Under offload:pressure, before it maps, phasealloc's cache and then the classes the
    current phase has not touched leave until the device has room for what wakes."""
    pool_class = getattr(module, "CuMemAllocator", None)
    if pool_class is None or "_phasealloc_wake_up" in vars(pool_class):
        return
    original = pool_class.wake_up

    @functools.wraps(original)
    def wake_up(pool, tags=None, *args, **kwargs):
        _before_engine_wake(pool, tags)
        return original(pool, tags, *args, **kwargs)

    pool_class._phasealloc_wake_up = original
    pool_class.wake_up = wake_up
    _wrapped_pools.append(pool_class)


def _unwrap_engine_wake():
    while _wrapped_pools:
        pool_class = _wrapped_pools.pop()
        pool_class.wake_up = vars(pool_class)["_phasealloc_wake_up"]
        del pool_class._phasealloc_wake_up


def _waking_bytes(pool, tags):
    """{device: bytes} the pool's wake_up(tags) maps: its asleep allocations with those tags (all, for
    a vLLM whose allocations do not say whether they sleep: a wake follows a sleep of all of them)."""
    out = {}
    for data in pool.pointer_to_data.values():
        if getattr(data, "is_asleep", True) and (tags is None or data.tag in tags):
            device, size = int(data.handle[0]), int(data.handle[1])
            out[device] = out.get(device, 0) + size
    return out


def _before_engine_wake(pool, tags):
    if _mode != "pressure" or _disabled_reason is not None:
        return
    import torch

    try:
        for device, needed in _waking_bytes(pool, tags).items():
            if needed <= torch.cuda.mem_get_info(device)[0]:
                continue
            counts["engine_wakes"] += 1
            torch.cuda.empty_cache()  # phasealloc's cache first: it costs nothing to give back
            short = needed - torch.cuda.mem_get_info(device)[0]
            if short > 0:
                with _lock:
                    if _disabled_reason is None and _offload_idle(device, enough_bytes=short):
                        counts["engine_wakes_relieved"] += 1
    except Exception as exc:  # noqa: BLE001 (the wake goes on, and fails as it would have)
        _stop(exc)


def _make_room(device, keep):
    """Offloads every class the current phase has not touched (but `keep`); whether any page left."""
    return _offload_idle(device, keep=keep) > 0


def _on_pressure(device, nbytes):
    """The library's pressure handler: an allocation of `nbytes` on `device` ran out of memory.
    Offloads idle classes, largest first, until that many bytes of pages are given back; 1 when
    any were (the allocation is then tried again), else 0. Never raises (a C callback)."""
    try:
        with _lock:
            counts["pressure_calls"] += 1
            if _disabled_reason is not None:
                return 0
            freed = _offload_idle(device, enough_bytes=nbytes)
            if freed:
                counts["pressure_relieved"] += 1
            return 1 if freed else 0
    except Exception:  # noqa: BLE001 (inside an allocation: the allocation fails as it would have)
        return 0


def _touch(key, kind, owner, tensors):
    """Records that the current phase uses class `key`, and brings it back if it is away."""
    with _lock:
        cls = _classes.get(key)
        if cls is None:
            if kind == "tag":  # known from its first use, before it holds a block
                cls = _tag_class(key[1], owner)
            elif _is_trained(kind, owner):
                return  # the model a trainer trains: in use in most phases, never a class
            else:
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
        if _disabled_reason is not None:
            _touched.setdefault(name, set())
            return
        if name not in _touched:
            _touched[name] = set()
            if _mode == "auto":
                _offload_speculatively()
            return
        used = _touched[name]
        for key in list(_classes):
            cls = _classes[key]
            if cls.owner() is None or _is_trained(cls.kind, cls.owner()):  # gone, or a model a trainer trains
                if cls.away:
                    _move(cls, offload=False)
                del _classes[key]
                continue
            if key in used and cls.away and not _chunked(cls):  # a chunked step brings its own back
                _move(cls, offload=False)
            elif key not in used and not cls.away and _mode == "auto":
                _move(cls, offload=True)


def _offload_speculatively():
    """At a phase never seen before: the classes whose every use a hook sees and brings back first
    (frozen models: their forward pre-hook; optimizer state: its step) leave, as if the phase would
    not use them. A wrong guess costs a restore in this first interval, never a value; a right one
    keeps the first step from holding what later steps do not (the schedule is learned only after
    it). Under _lock."""
    for key in list(_classes):
        cls = _classes[key]
        owner = cls.owner()
        if cls.kind in ("frozen", "optimizer") and not cls.away and owner is not None \
                and not _is_trained(cls.kind, owner) and not _chunked(cls):
            _move(cls, offload=True)


def _touch_trained(optimizer):
    _touch(("trained", id(optimizer)), "trained", optimizer, _trained_tensors)


def _on_tag(name, number):
    """A tag's block is entered: a use of its blocks in the current phase."""
    _touch(("tag", name), "tag", number, None)


def _chunk_move(tensors, offload):
    """A chunked step's move of one chunk's state; a failure leaves it where it is (the step still
    reads and writes it right, over the link when it is on the host)."""
    from . import _same_address

    for device, group in _by_device(tensors).items():
        if offload and _stopped_where_offload_unmaps(device):
            return
        try:
            done = (_same_address.offload_ours if offload else _same_address.restore_ours)(group, device=device)
        except _same_address.OffloadOutOfMemory:
            counts["restore_ooms"] += 1  # stays on the host, correct
            continue
        except Exception as exc:  # noqa: BLE001 (a budget, a device failure: stop, say so once)
            _stop(exc)
            return
        for key in ("page_bytes", "copied_bytes", "kept_bytes"):
            counts[key] += done[key]


def _wrap_step(optimizer):
    """Under offload:auto, a torch.optim optimizer steps a chunk of its parameters at a time
    (_chunked_step) when its state is on the host, and at its first step, which makes the state: a
    chunk's state is made, used and sent to the host before the next chunk's, so no step holds more
    than a chunk of it. Installed when the optimizer is made (install() wraps Optimizer.__init__),
    or at its first step for one made before."""
    if _mode != "auto" or "_phasealloc_step" in vars(optimizer) or not _chunked_step.chunkable(optimizer):
        return
    optimizer._phasealloc_step = optimizer.step  # bound, with whatever wrapped it (an LR scheduler's counter)
    # A bound method, as torch's own step is: an LR scheduler made later wraps it through __func__,
    # and a deepcopy of the optimizer copies it bound to the copy.
    optimizer.step = types.MethodType(_step, optimizer)


def _step(optimizer, *args, **kwargs):
    key = ("optimizer", id(optimizer))
    with _lock:
        cls = _classes.get(key)
        first = cls is None and not optimizer.state and _on_gpu(optimizer)
        no_closure = args in ((), (None,)) and (not kwargs or kwargs == {"closure": None})  # accelerate passes None
        chunked = no_closure and _disabled_reason is None and (first or (cls is not None and cls.away))
    plan = None
    if chunked:
        try:  # before any update: a failure here leaves the step to the optimizer, whole
            plan = _chunked_step.chunks(optimizer)
        except Exception as exc:  # noqa: BLE001 (a tensor type the chunks cannot size: stop, say so once)
            _stop(exc)
    if plan is None:
        return optimizer._phasealloc_step(*args, **kwargs)
    with _lock:
        counts["chunked_steps"] += 1
    _in_chunked_step.value = True
    try:
        out = _chunked_step.step_in_chunks(optimizer, _chunk_move, plan)
    finally:
        _in_chunked_step.value = False
    if first:  # the state is known from now on, and on the host (the chunks sent it there)
        _touch(key, "optimizer", optimizer, _optimizer_tensors)
        with _lock:
            cls = _classes.get(key)
            if cls is not None and _disabled_reason is None:
                cls.away = True
        _optimizers.add(optimizer)
        _refresh_trained()
        _touch_trained(optimizer)
    return out


_step.__name__ = "step"  # a pickled optimizer comes back with torch's own step (unchunked, right)


def _on_gpu(optimizer):
    return any(getattr(p, "is_cuda", False) for group in optimizer.param_groups for p in group["params"])


def _patch_optimizer_init(torch):
    """Makes every torch.optim optimizer made from now on wrap its step (_wrap_step)."""
    base = torch.optim.Optimizer
    if "_phasealloc_init" in vars(base):
        return
    original = base.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _wrap_step(self)

    base._phasealloc_init = original
    base.__init__ = __init__


def _unpatch_optimizer_init():
    import torch

    base = torch.optim.Optimizer
    original = vars(base).get("_phasealloc_init")
    if original is not None:
        base.__init__ = original
        del base._phasealloc_init


def _chunked(cls):
    """Whether class `cls` is an optimizer's state that its steps bring back by chunks."""
    owner = cls.owner()
    return cls.kind == "optimizer" and owner is not None and "_phasealloc_step" in vars(owner)


def _step_pre_hook(optimizer, args, kwargs):
    if getattr(_in_chunked_step, "value", False):  # its state comes back by chunks: a use, not a restore
        with _lock:
            if _phase is not None:
                _touched.setdefault(_phase, set()).add(("optimizer", id(optimizer)))
        _touch_trained(optimizer)
        return
    if optimizer.state:
        _touch(("optimizer", id(optimizer)), "optimizer", optimizer, _optimizer_tensors)
    if optimizer in _optimizers:
        _touch_trained(optimizer)


def _step_post_hook(optimizer, args, kwargs):
    if getattr(_in_chunked_step, "value", False):
        _refresh_trained()
        return
    # The first step creates the state: known from now on, touched in this phase.
    _touch(("optimizer", id(optimizer)), "optimizer", optimizer, _optimizer_tensors)
    _wrap_step(optimizer)
    _optimizers.add(optimizer)
    _refresh_trained()  # once per step: param groups may have been added since
    _touch_trained(optimizer)


def _frozen(module):
    """A module that looks idle outside its forwards: parameters, none needing grad or run without grad."""
    import torch

    params = list(module.parameters())
    return bool(params) and (not torch.is_grad_enabled() or not any(p.requires_grad for p in params))


def _refresh_trained():
    """Notes the parameters every optimizer that stepped trains."""
    global _trained_ids, _trained_by
    _trained_by = {id(p): opt for opt in list(_optimizers) for group in opt.param_groups for p in group["params"]}
    _trained_ids = set(_trained_by)


def _is_trained(kind, owner):
    return kind == "frozen" and owner is not None and any(id(p) in _trained_ids for p in owner.parameters())


def _forward_pre_hook(module, args):
    depth = getattr(_depth, "value", 0)
    _depth.value = depth + 1
    if depth == 0:
        if _frozen(module):
            _touch(("frozen", id(module)), "frozen", module, _module_tensors)
        if _trained_by:  # a trained model's forward touches what its optimizers train
            for optimizer in {_trained_by.get(id(p)) for p in module.parameters()} - {None}:
                _touch_trained(optimizer)


def _forward_hook(module, args, output):
    _depth.value = max(0, getattr(_depth, "value", 0) - 1)


def install(torch, mode="auto"):
    """Installs the hooks and the phase observers (detected and explicit phases; idempotent); with
    mode "pressure", the library's pressure handler too."""
    global _mode, _pressure_handler
    if mode not in ("auto", "pressure"):
        raise ValueError("offload mode %r (expected auto or pressure)" % (mode,))
    if _handles:
        return
    _mode = mode
    if mode == "pressure":
        from . import _library

        _pressure_handler = _library.PRESSURE_HANDLER(_on_pressure)
        _library.load().phasealloc_set_pressure_handler(_pressure_handler)
    optim = importlib.import_module("torch.optim.optimizer")  # by name: not an attribute in torch 2.15
    modules = importlib.import_module("torch.nn.modules.module")
    _handles.append(optim.register_optimizer_step_pre_hook(_step_pre_hook))
    _handles.append(optim.register_optimizer_step_post_hook(_step_post_hook))
    _handles.append(modules.register_module_forward_pre_hook(_forward_pre_hook))
    _handles.append(modules.register_module_forward_hook(_forward_hook, always_call=True))
    _phase_detect.add_observer(_on_phase)
    _phases.add_listener(_on_phase)
    from . import _same_address

    _same_address._tag_listeners.append(_on_tag)
    if mode == "auto":
        _patch_optimizer_init(torch)
    else:
        _import_hooks.when_imported("vllm.device_allocator.cumem", _install_engine_wake_hook)
    _on_phase(_phases.current_phase())


def uninstall():
    global _phase, _disabled_reason, _pressure_handler
    if _pressure_handler is not None:
        from . import _library

        _library.load().phasealloc_set_pressure_handler(_library.PRESSURE_HANDLER())  # NULL: none
        _pressure_handler = None
    while _handles:
        _handles.pop().remove()
    _unpatch_optimizer_init()
    _import_hooks.cancel("vllm.device_allocator.cumem", _install_engine_wake_hook)
    _unwrap_engine_wake()
    for remove in (_phase_detect.remove_observer, _phases.remove_listener):
        try:
            remove(_on_phase)
        except ValueError:
            pass
    from . import _same_address

    if _on_tag in _same_address._tag_listeners:
        _same_address._tag_listeners.remove(_on_tag)
    with _lock:
        for cls in list(_classes.values()):
            if cls.away:
                _move(cls, offload=False)
        _classes.clear()
        _touched.clear()
        _optimizers.clear()
        _trained_ids.clear()
        _trained_by.clear()
        _phase = None
        _disabled_reason = None


def summary():
    """What the schedule learned and did: classes, per-phase touched classes, counts."""
    with _lock:
        return {
            "classes": {"%s:%s" % c.key: {"away": c.away} for c in _classes.values()},
            "touched": {phase: sorted("%s:%s" % key for key in keys) for phase, keys in _touched.items()},
            "counts": dict(counts),
            "mode": _mode,
            "disabled": _disabled_reason,
        }
