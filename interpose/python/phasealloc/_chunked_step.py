"""An optimizer step taken a chunk of parameters at a time, each chunk's state brought back to the
GPU just for its part of the step (offload:auto's optimizer phase).

Rationale: under offload:auto an optimizer's state (Adam's two moments: twice the trained
parameters in fp32) is on the host outside step(); brought back whole for the step, it sits on the
GPU beside the weights and the gradients, and that phase sets the job's peak. Stepping a chunk at a
time holds one chunk of the state instead of all of it.

Approach:
  - torch.optim's optimizers that update each parameter from its own gradient and state only
    (PER_PARAMETER: Adam, AdamW, SGD, ...) give the same update whether the parameters are stepped
    all at once or group by group in several calls: each call steps the parameter groups cut to
    one chunk (the groups' hyperparameters unchanged), between a restore of that chunk's state
    and an offload of it.
  - The step's hooks run once, as torch.optim's own wrapper runs them (pre-hooks, the updates,
    the step code, post-hooks): the chunks call the class's step beneath that wrapper
    (`__wrapped__`), so phase detection sees one optimizer phase and a user's post-hook (an EMA)
    one step. An LR scheduler's check that step() ran (`_opt_called`) is set as its wrapper would.
  - Chunks: parameters in group order, a chunk closed once its state reaches the chunk size (the
    state's bytes / CHUNKS, at least MIN_CHUNK_BYTES). The first step, which makes the state, is cut
    the same way from the parameters' sizes: each chunk's new state goes to the host after its
    update, so that step does not hold the whole state either.
Limitations:
  - Other optimizers (LBFGS, SparseAdam, anything outside torch.optim), a step with a closure, and
    a state that is on the GPU step whole, as before. A step pre-hook that replaces the step's
    arguments cannot run with chunks: the step raises, naming it.
  - A chunk's restore waits for its copies: the next chunk's copy does not overlap this chunk's
    update.
  - offload:auto wraps step() on the optimizer instance when it is made (a bound method, as an LR
    scheduler's wrapper is): a job that pickles the optimizer object itself, rather than its
    state_dict(), pickles that attribute too.
"""

import importlib
from itertools import chain

PER_PARAMETER = frozenset(("Adam", "AdamW", "SGD", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "RMSprop",
                           "Rprop", "ASGD", "Adafactor"))
CHUNKS = 8
MIN_CHUNK_BYTES = 16 << 20


def chunkable(optimizer):
    """Whether stepping `optimizer` by chunks of parameters is stepping it once."""
    cls = type(optimizer)
    optim = importlib.import_module("torch.optim.optimizer")
    return (cls.__module__.startswith("torch.optim") and cls.__name__ in PER_PARAMETER
            and hasattr(cls.step, "__wrapped__") and hasattr(optim, "_global_optimizer_pre_hooks")
            and hasattr(optim, "_global_optimizer_post_hooks"))


def state_tensors(optimizer, params):
    """The CUDA tensors of the optimizer's state for `params`."""
    out = []
    for p in params:
        for value in optimizer.state.get(p, {}).values():
            if getattr(value, "is_cuda", False):
                out.append(value)
    return out


def _own_bytes(tensor):
    """A tensor's own bytes (not its storage's: a parameter may view a larger flat buffer)."""
    from ._same_address import plain_tensors

    return sum(t.numel() * t.element_size() for t in plain_tensors([tensor]))


def _nbytes(tensors):
    from ._same_address import plain_tensors  # a DTensor's bytes are its local shard's

    return sum(t.untyped_storage().nbytes() for t in plain_tensors(tensors))


STATE_PER_PARAMETER_BYTE = 2  # a parameter without state yet: Adam's two moments, the common case


def chunks(optimizer):
    """The optimizer's parameters, in group order, cut into chunks by the bytes of their state (one
    without state yet, before the first step or added since, counts as STATE_PER_PARAMETER_BYTE
    times its own bytes: the first step, which makes the state, is cut as the later ones are)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    sizes = [_nbytes(state_tensors(optimizer, [p])) if optimizer.state.get(p) else
             STATE_PER_PARAMETER_BYTE * _own_bytes(p) for p in params]
    limit = max(sum(sizes) // CHUNKS, MIN_CHUNK_BYTES)
    out, current, held = [], [], 0
    for p, size in zip(params, sizes):
        current.append(p)
        held += size
        if held >= limit:
            out.append(current)
            current, held = [], 0
    if current:
        out.append(current)
    return out


def step_in_chunks(optimizer, move, plan):
    """optimizer.step(): its hooks once, and the update once per chunk of `plan` (chunks(optimizer))
    with the parameter groups cut to the chunk, after move(state tensors, offload=False) and before
    move(..., offload=True). The groups are whole again afterwards, whatever happens."""
    optim = importlib.import_module("torch.optim.optimizer")
    update = type(optimizer).step.__wrapped__  # the class's step beneath torch's hook wrapper
    args = (optimizer,)
    for hook in chain(optim._global_optimizer_pre_hooks.values(), optimizer._optimizer_step_pre_hooks.values()):
        if hook(optimizer, args, {}) is not None:
            raise RuntimeError("phasealloc: optimizer step pre-hook %r replaces the step's arguments, which a "
                               "step in chunks (offload:auto) cannot pass on" % (hook,))
    groups = optimizer.param_groups
    whole = [group["params"] for group in groups]
    try:
        for chunk in plan:
            ids = {id(p) for p in chunk}
            move(state_tensors(optimizer, chunk), offload=False)
            for group, params in zip(groups, whole):
                group["params"] = [p for p in params if id(p) in ids]
            update(optimizer)
            move(state_tensors(optimizer, chunk), offload=True)  # with what a first step made
    finally:
        for group, params in zip(groups, whole):
            group["params"] = params
    optimizer._optimizer_step_code()
    for hook in chain(optimizer._optimizer_step_post_hooks.values(), optim._global_optimizer_post_hooks.values()):
        hook(optimizer, args, {})
    if hasattr(optimizer, "_opt_called"):
        optimizer._opt_called = True  # what an LR scheduler's wrapper of step() records
    return None
