"""The value mode: PyTorch operations on simcuda, the simulated GPU, give real values, at the level
SIMCUDA_GPU names (values:off|observable|exact; observable by default). Installed by torch_adapt
when `phasealloc-run --sim-gpu` runs a job.

Rationale: simcuda skips kernels, so what a kernel computes is whatever the memory held. Host code
that reads device values (generate() stopping on EOS, `.item()` of a length, a boolean mask's
`nonzero`, MoE routing counts, a reward's sign) then takes paths a real run never takes, and real
frameworks die (TRL's GRPOTrainer in its first step). A real run's values are what PyTorch's CPU
kernels compute over the same inputs, and simcuda's device memory is host memory: the values can
be computed on the CPU straight into it, while the CUDA side of every operation (its allocations,
workspaces, streams and launches) stays what the wheel does.

Approach: a TorchDispatchMode, pushed once at `import torch`, sees every aten operation. What it
does with one is decided by value_classify.classify() (the rules below, one kind of action each,
tested rule by rule); this module executes the action.
- An operation that touches no CUDA tensor, or only makes views, passes through; so do the
  collectives (simcuda's NCCL computes them), operations on the tensors of tracing (fake and
  functional tensors, which have no memory), and work captured into a CUDA graph.
- An operation on a tensor subclass with a dispatch of its own (nested jagged tensors, DTensor) is
  handed to that dispatch with this mode still on (the mode answers NotImplemented), so the
  operations on plain tensors it makes (a jagged tensor's values and offsets, a DTensor's local
  shard) come back here and are computed. Subclasses without a dispatch of their own (vLLM's
  parameter classes) are plain tensors here.
- Otherwise the CUDA operation runs first, as the wheel runs it (its kernels are skipped); then the
  same operation runs on CPU *aliases* of its CUDA tensors: CPU tensors over the very bytes of the
  device memory (ctypes + torch.frombuffer + as_strided; no copy, no CUDA call). An in-place or
  out= operation writes its result straight into device memory that way; a functional one's CPU
  result is copied into the CUDA output's alias. Factory operations (`zeros`, `arange`, `randn`,
  ...) on "cuda" run again with device="cpu" into the output's alias.
- Operations whose output *size* depends on values (PyTorch tags them dynamic_output_shape:
  `nonzero`, `masked_select`, `unique`, boolean indexing, `repeat_interleave`, `bincount`,
  `one_hot`), `index_put_` and `index_put` (the backward of boolean indexing) with boolean
  indices, and `masked_scatter_backward` (a fixed output size, but its CUDA form is a
  `masked_select` below this mode) run on the CPU only: the CUDA kernel would read a count that
  was never computed. Their CUDA output is then allocated at the size the CPU gave,
  and filled through its alias.
- Operations that return a Python value (`item`, `equal`, `is_nonzero`) answer from the CPU, and
  host outputs of CUDA operations get the CPU's result too (`.cpu()` of a strided view runs a
  gather kernel on the device before its copy).
- An operation whose CUDA kernel is Python code (an extension's op registered with torch.library:
  vLLM's attention and KV-cache update) runs that kernel with the mode on: the operations it calls
  come back here and are computed. Extensions' compiled CUDA-only operations that a job's values
  depend on have CPU forms (vllm_forms.py: vLLM's norms, activation, rotary embedding, KV-cache
  write and FlashAttention), and Triton kernels are run by Triton's interpreter at exact
  (triton_values.py).
- Attention kernels that exist on CUDA only (flash and memory-efficient SDPA, forward and
  backward) are computed with PyTorch's math attention on the CPU (dropout 0 only): the output and
  the gradients are exact, the log-sum-exp side outputs are not (nothing but their backward, which
  is also computed here, reads them).
- Randomness: CPU draws, seeded by torch.manual_seed like every CPU draw: valid (a token id is in
  range) and reproducible, not the GPU's bit pattern. An operation given a CUDA generator draws
  from a CPU generator seeded with that generator's state.

Levels:
- exact: every operation above is computed.
- observable (the default): the same, except the heavy floating-point products (value_classify.HEAVY: matrix
  products, convolutions, attention, forward and backward). Their outputs are the *stand-in*:
  zeros, and for a product with an additive term (addmm, baddbmm, ...: beta * input + product)
  the term, so a bias still shows. Everything host code reads cheaply is real: indices, masks,
  comparisons, sampling, sizes, counts, losses computed from the stand-in logits. A model's
  logits are then its output bias (zero without one): sampling is uniform, greedy decoding picks
  token 0, losses are constant. The level was chosen as the default because it is the cheapest
  that runs TRL's GRPO, RLOO, SFT and DPO trainers unmodified (off does not).
- off: nothing is computed, and neither device-to-device copies nor the simulated NCCL's
  collectives move bytes (simcuda skips both); memory is as the kernels left it. The only level that leaves host memory untouched: what the job writes at the other levels is committed host memory, so a job
  that fills N GiB of simulated GPU memory needs N GiB of this machine's (torch_adapt says so at
  start-up); dry runs larger than the machine take values:off.
- The stand-in is also what an operation with no CPU kernel gets at every level (a custom CUDA
  extension, attention with dropout, a CUDA-only fused kernel): its fresh outputs are zeros, the
  arguments it writes in place keep what they held, and it is named once on stderr
  ("simcuda: values: OP has no CPU kernel here (...): its outputs are the stand-in (zeros)").

Costs, measured on the 2-core, 24 GiB development machine (tools/simcuda/bench/value_levels.py).
Each job is a whole command, start-up included, with PyTorch's allocator; the machine was also
compiling (load ~3), so times vary by about a second between runs.

  | job: time, peak RSS                  | off             | observable      | exact            |
  |--------------------------------------|-----------------|-----------------|------------------|
  | TRL GRPOTrainer, tiny Llama, 3 steps | fails in step 1 | 5.2 s, 576 MiB  | 5.3-7.9 s, 578 M |
  | TRL RLOOTrainer, 3 steps             | fails in step 1 | 5.9 s, 576 MiB  | 10.8 s, 578 MiB  |
  | TRL SFTTrainer / DPOTrainer          | 5.5 / 5.3 s     | 5.6 / 5.7 s     | 5.8 / 5.8 s      |
  | GPT-2 small: train step, generate 16 | 3.7 s, 448 MiB  | 11.6 s, 4.0 GiB | 18.4 s, 4.3 GiB  |

  No operation of the four TRL runs fell back to the stand-in at any level; in the GPT-2 run at
  exact, GPT-2's attention with dropout 0.1 did (the memory-efficient SDPA kernel, forward and
  backward). The tiny models cost next to nothing to compute; GPT-2 small shows the scale: the
  products are a third of exact's time, and at both computing levels what the job wrote (2.6 GiB
  of simulated memory at its peak, plus the CPU's temporaries) is resident.

Limitations:
- kernels that bypass the dispatcher are not computed here and get no stand-in: Triton kernels
  (at exact, triton_values.py computes those launched from Python; torch.compile's are not
  computed at any level); NCCL's collectives are not computed here either, but simcuda's NCCL moves and
  reduces their bytes itself (at every level but off);
- CUDA graphs: work captured into a graph is not computed, at capture (where a GPU does not run it
  either) or at its replays (which do not pass through the dispatcher); the copies and memsets of
  a replay are real, since simcuda performs them;
- a TorchDispatchMode changes one thing on the CUDA side: autograd's gradient accumulation sees
  the Python references the mode creates and copies a gradient it would otherwise steal. A GPT-2
  small training step makes 48 more allocations and ends backward 256 KiB higher (peak reserved
  unchanged);
- the data-dependent operations above allocate their output on the CUDA side but not the CUDA
  kernel's own temporaries (a few KiB of cub scratch): a dry run plans a hair less for them.
"""

import atexit
import ctypes
import hashlib
import sys

from . import introspect, vllm_forms
from . import value_classify as vc

_mode = None


def cpu_alias(t):
    """A CPU tensor over the bytes of CUDA tensor `t` (simcuda's device memory is host memory): what
    is written through it is in device memory, with no copy and no CUDA call."""
    import torch

    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    if nbytes == 0 or t.numel() == 0:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    raw = (ctypes.c_byte * nbytes).from_address(storage.data_ptr())
    base = torch.frombuffer(raw, dtype=torch.uint8)
    typed = base.view(t.dtype) if t.dtype != torch.uint8 else base
    return typed.as_strided(t.shape, t.stride(), t.storage_offset())


def _say(message):
    try:
        print("simcuda: values: " + message, file=sys.stderr)
    except Exception:
        pass


# Products with an additive term (beta * input + alpha * product): the stand-in keeps the term.
_ADDITIVE = frozenset(("addmm", "addmv", "baddbmm", "addbmm", "_addmm_activation"))


def _make_mode(torch, level):
    """The value mode at `level`: a TorchDispatchMode that executes what value_classify.classify()
    decides for each operation."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_map
    import torch.library as library
    import torch.nn.functional as F

    named_once = set()
    cpu_forms = _cpu_forms(torch)  # CPU computations of CUDA-only operations (attention kernels, ...)
    named_forms = vllm_forms.FORMS
    fake_key = torch._C._TorchDispatchModeKey.FAKE
    cuda_keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)
    python_kernels = {}  # op -> whether its CUDA kernel is Python code (an op is registered before its first call)

    def python_kernel(func):
        """Whether func's CUDA kernel was registered from Python (torch.library records those)."""
        known = python_kernels.get(func)
        if known is None:
            namespace, _, op = func._schema.name.partition("::")
            known = python_kernels[func] = "%s/%s/CUDA" % (namespace, op) in getattr(library, "_impls", ())
        return known

    now = vc.context(
        capturing=torch._C._cuda_isCurrentStreamCapturing,  # captured work runs at replay, not now
        # A FakeTensorMode (torch.compile's tracing, vLLM's shape propagation): fake outputs, no memory.
        faking=lambda: torch._C._get_dispatch_mode(fake_key) is not None,
        python_kernel=python_kernel, forms=named_forms, heavy_forms=vllm_forms.HEAVY)

    def is_cuda(x):
        return vc.is_cuda(torch, x)

    alias = cpu_alias

    # A CUDA generator an operation is given (vLLM's per-request samplers, a seeded dropout) draws on
    # the CPU from a generator seeded with that generator's state (its seed and Philox offset, which
    # the CUDA operation's host side has just advanced): each draw differs, and re-seeding the CUDA
    # generator repeats its draws, as on a GPU (with other numbers).
    def cpu_generator(g):
        state = g.get_state().numpy().tobytes()
        seed = int.from_bytes(hashlib.blake2b(state, digest_size=8).digest(), "little") >> 1
        return torch.Generator().manual_seed(seed)

    def to_cpu(x):
        if is_cuda(x):
            return alias(x)
        if isinstance(x, torch.Generator) and x.device.type == "cuda":
            return cpu_generator(x)
        if isinstance(x, torch.device) and x.type == "cuda":
            return torch.device("cpu")
        return x

    def cpu_kwargs(kwargs):
        out = tree_map(to_cpu, kwargs)
        if out.get("device") is not None and str(out["device"]).startswith("cuda"):
            out["device"] = torch.device("cpu")
        out.pop("pin_memory", None)
        return out

    def fresh(out, inputs):
        """Whether an operation whose schema lets its output alias an input (`to`, `reshape`,
        `contiguous`; PyTorch dispatches `aten.to.dtype` itself under inference mode) made a new
        tensor after all: then its kernel wrote it, and it is computed like any other output."""
        storages = {x.untyped_storage().data_ptr() for x in inputs if is_cuda(x)}
        outs = [o for o in tree_flatten(out)[0] if is_cuda(o)]
        return any(o.untyped_storage().data_ptr() not in storages for o in outs)

    def unsupported(func, exc):
        name = str(func)
        if name not in named_once:
            named_once.add(name)
            _say("%s has no CPU kernel here (%s): its outputs are the stand-in (zeros)" %
                 (name, str(exc).splitlines()[0][:160]))

    def stand_in(func, args, kwargs, out):
        """The stand-in for outputs no CPU kernel computed: zeros, or for a product with an
        additive term, the term (beta * input). Arguments written in place keep what they held,
        as if the operation had been the identity; an out= argument is an output."""
        if vc.writes_argument(func):
            outs = [kwargs["out"]] if isinstance(kwargs.get("out"), torch.Tensor) else []
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
        outs = [o for o in outs if isinstance(o, torch.Tensor) and o.numel() > 0]
        term = None
        name = func._schema.name.split("::")[-1]
        if name in _ADDITIVE and outs:  # beta is keyword-only in every one of them
            term = to_cpu(args[0]) * kwargs.get("beta", 1)
            if name == "_addmm_activation":
                term = F.gelu(term) if kwargs.get("use_gelu", False) else F.relu(term)
        for o in outs:
            view = alias(o) if is_cuda(o) else o
            if term is not None:
                view.copy_(term.expand_as(view) if term.dim() <= view.dim() else term)
            else:
                view.zero_()

    def fill(out, ref):
        """Copies the CPU result(s) `ref` into the output(s) `out`: a CUDA one through its alias, a
        host one directly (a None in `ref` leaves that output as the kernel left it)."""
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        for o, r in zip(outs, refs):
            both = isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor)
            if not both or o.shape != r.shape or o.numel() == 0:
                continue
            if is_cuda(o):
                alias(o).copy_(r)
            elif o.device.type == "cpu":  # a copy to the host (`.cpu()` of a strided view runs a kernel first)
                o.copy_(r)

    def defined(out):
        """A Tensor[] result as the mode can hand it back: an undefined tensor in it (FA3's unused
        accumulators) comes to Python as None, which cannot go back; it becomes an empty tensor."""
        if not isinstance(out, list) or all(o is not None for o in out):
            return out
        device = next((o.device for o in out if isinstance(o, torch.Tensor)), "cpu")
        return [torch.empty(0, device=device) if o is None else o for o in out]

    def bound(func, args, kwargs):
        """The arguments by their schema names, defaults filled in (a form reads them by name)."""
        named = {}
        for i, argument in enumerate(func._schema.arguments):
            if i < len(args):
                named[argument.name] = args[i]
            elif argument.name in kwargs:
                named[argument.name] = kwargs[argument.name]
            else:
                named[argument.name] = argument.default_value if argument.has_default_value() else None
        return named

    def on_cpu_first(func, args, kwargs):
        try:
            ref = func(*tree_map(to_cpu, args), **cpu_kwargs(kwargs))
        except Exception as exc:
            unsupported(func, exc)
            out = func(*args, **kwargs)
            stand_in(func, args, kwargs, out)
            return out
        if vc.writes_argument(func):  # index_put_, out= variants: the CPU run wrote the aliases
            out_arg = kwargs.get("out")
            if is_cuda(out_arg) and isinstance(ref, torch.Tensor) and out_arg.shape != ref.shape:
                out_arg.resize_(ref.shape)
                alias(out_arg).copy_(ref)
            return args[0] if out_arg is None else out_arg
        device = next(x.device for x in tree_flatten((args, kwargs))[0] if is_cuda(x))

        def on_device(r):
            if not isinstance(r, torch.Tensor):
                return r
            t = torch.empty_strided(r.shape, r.stride(), dtype=r.dtype, device=device)
            if t.numel() > 0:
                alias(t).copy_(r)
            return t

        return tree_map(on_device, ref)

    def by_form(func, args, kwargs, out):
        try:
            outs = out if isinstance(out, (tuple, list)) else [out]
            named_forms[func._schema.name](bound(func, tree_map(to_cpu, args), cpu_kwargs(kwargs)),
                                           [alias(o) if is_cuda(o) else None for o in outs])
        except Exception as exc:
            unsupported(func, exc)
            stand_in(func, args, kwargs, out)

    def computed(func, args, kwargs, out):
        try:
            ref = cpu_forms.get(func, func)(*tree_map(to_cpu, args), **cpu_kwargs(kwargs))
        except Exception as exc:  # no CPU kernel, or arguments only CUDA takes
            unsupported(func, exc)
            stand_in(func, args, kwargs, out)
            return
        if not vc.writes_argument(func):
            fill(out, ref)

    class values_mode(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):
            """torch.compile compiles as it does without the mode: what it fuses is not computed."""
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            todo = vc.classify(torch, func, args, kwargs, level, now)
            kind = todo.kind
            if kind == vc.PASS:
                return func(*args, **kwargs)
            if kind == vc.SUBCLASS:
                # The subclass's own dispatch runs next, with this mode still on: the operations on
                # plain tensors it makes (a nested tensor's values and offsets, a DTensor's local
                # shards) come back here and are computed.
                return NotImplemented
            if kind == vc.PYTHON_KERNEL:
                # Its CUDA kernel is Python code (vLLM's attention and KV-cache ops): run it with this
                # mode on, so the operations it calls come back here and are computed.
                with self:
                    return func.redispatch(cuda_keys, *args, **kwargs)
            if kind == vc.PYTHON_ANSWER:
                return func(*tree_map(to_cpu, args), **cpu_kwargs(kwargs))
            if kind == vc.CPU_FIRST:
                return on_cpu_first(func, args, kwargs)
            out = func(*args, **kwargs)  # the CUDA side, as the wheel runs it (kernels skipped)
            if kind == vc.CUDA_ONLY or (todo.aliasing and not fresh(out, tree_flatten((args, kwargs))[0])):
                return out
            if kind in (vc.STAND_IN, vc.FORM_STAND_IN):
                stand_in(func, args, kwargs, out)
            elif kind == vc.FORM:  # an extension's operation (vLLM's), computed by its CPU form
                by_form(func, args, kwargs, out)
            else:
                computed(func, args, kwargs, out)
            return defined(out) if kind in (vc.FORM, vc.FORM_STAND_IN) else out

    return values_mode()


def _cpu_forms(torch):
    """CPU computations for operations whose CUDA form has no CPU kernel or other arguments (the
    CUDA-only attention kernels; log_sigmoid's empty CUDA buffer; integer histc): {op: function(cpu args) ->
    outputs}, with None for the outputs they do not compute."""
    import torch.nn.functional as F

    aten = torch.ops.aten

    def attend(q, k, v, bias, dropout_p, is_causal, scale):
        if dropout_p:
            raise NotImplementedError("attention with dropout %g" % dropout_p)
        gqa = q.dim() >= 3 and k.dim() >= 3 and q.size(-3) != k.size(-3)  # grouped-query attention
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=is_causal, scale=scale,
                                              enable_gqa=gqa)

    def grads(grad_out, q, k, v, bias, dropout_p, is_causal, scale):
        """Softmax attention's gradients, written out (autograd is below us here, so it cannot record)."""
        if dropout_p:
            raise NotImplementedError("attention with dropout %g" % dropout_p)
        groups = q.size(-3) // k.size(-3)
        qf, kf, vf, go = (t.float() for t in (q, k, v, grad_out))
        if groups > 1:  # grouped-query attention: each key/value head serves `groups` query heads
            kf, vf = kf.repeat_interleave(groups, dim=-3), vf.repeat_interleave(groups, dim=-3)
        sc = scale if scale is not None else 1.0 / (q.size(-1) ** 0.5)
        scores = qf @ kf.transpose(-2, -1) * sc
        if is_causal:
            L, S = scores.shape[-2:]
            scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(S - L + 1), float("-inf"))
        if bias is not None:
            scores = scores.masked_fill(~bias, float("-inf")) if bias.dtype == torch.bool else scores + bias.float()
        p = scores.softmax(-1)
        dv = p.transpose(-2, -1) @ go
        dp = go @ vf.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True))
        dq = ds @ kf * sc
        dk = ds.transpose(-2, -1) @ qf * sc
        if groups > 1:
            dk = dk.unflatten(-3, (k.size(-3), groups)).sum(-3)
            dv = dv.unflatten(-3, (v.size(-3), groups)).sum(-3)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)

    def flash(q, k, v, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
        return (attend(q, k, v, None, dropout_p, is_causal, scale),) + (None,) * 8

    def flash_backward(grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
                       is_causal, philox_seed, philox_offset, *, scale=None):
        return grads(grad_out, q, k, v, None, dropout_p, is_causal, scale)

    def efficient(q, k, v, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *, scale=None):
        return (attend(q, k, v, attn_bias, dropout_p, is_causal, scale), None, None, None)

    def efficient_backward(grad_out, q, k, v, attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p,
                           grad_input_mask, is_causal=False, *, scale=None):
        dq, dk, dv = grads(grad_out, q, k, v, attn_bias, dropout_p, is_causal, scale)
        return (dq, dk, dv, None)

    def log_sigmoid_backward(grad_output, x, buffer):
        # CUDA's log_sigmoid_forward leaves its buffer empty; the CPU kernel reads one.
        return aten.log_sigmoid_backward.default(grad_output, x, aten.log_sigmoid_forward.default(x)[1])

    def histc(x, bins=100, min=0, max=0):
        # CUDA counts integer tensors too (MoE routers count tokens per expert so); the CPU kernel
        # takes floating point only.
        if x.is_floating_point():
            return aten.histc.default(x, bins, min, max)
        return aten.histc.default(x.double(), bins, min, max).to(x.dtype)

    table = {aten.log_sigmoid_backward.default: log_sigmoid_backward, aten.histc.default: histc}
    for name, fn in (("_scaled_dot_product_flash_attention", flash),
                     ("_scaled_dot_product_flash_attention_backward", flash_backward),
                     ("_scaled_dot_product_efficient_attention", efficient),
                     ("_scaled_dot_product_efficient_attention_backward", efficient_backward)):
        packet = getattr(aten, name, None)
        if packet is not None and hasattr(packet, "default"):
            table[packet.default] = fn
    return table


def install(torch):
    """Pushes the value mode for the rest of the process (idempotent); 'off' does nothing."""
    global _mode
    chosen = introspect.value_level()
    if chosen == "off" or _mode is not None:
        return chosen
    from torch.utils._python_dispatch import _push_mode

    _mode = _make_mode(torch, chosen)
    _push_mode(_mode)
    _in_every_new_thread()
    atexit.register(_uninstall)  # no Python dispatch while the interpreter shuts down
    return chosen


def _in_every_new_thread():
    """PyTorch's dispatch-mode stack is per thread, and Python threads start with an empty one: the
    mode is pushed at the start of every thread started after it was installed (Ray runs an async
    actor's methods in a thread pool: verl's FSDP workers compute their log-probs there). Threads
    PyTorch starts itself (autograd's device threads) inherit the caller's stack already."""
    import threading
    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode, _push_mode

    start = threading.Thread._bootstrap_inner

    def bootstrap_inner(thread):
        if _mode is None:
            return start(thread)
        _push_mode(_mode)
        try:
            return start(thread)
        finally:
            if _get_current_dispatch_mode() is _mode:
                _pop_mode()

    threading.Thread._bootstrap_inner = bootstrap_inner


def _uninstall():
    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode

    if _mode is not None and _get_current_dispatch_mode() is _mode:
        _pop_mode()
