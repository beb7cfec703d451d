"""What the value mode (values.py) does with one aten operation: classify(func, args, kwargs, level,
context) -> action; values.py's mode executes the action.

Rationale: the decision (which operations are computed, on which side first, which get the
stand-in) is the value mode's policy; executing it (CPU aliases, copies into device memory) is its
mechanism. Apart, each rule is tested on its own (tests/test_value_classify.py), and the executor
has one branch per kind of action.

Approach: classify() reads only the operation (its schema, tags, namespace), its arguments' types and
devices, the level, and what `context` says of the process now (a stream capture, a fake-tensor
mode, whether the operation's CUDA kernel is Python code, the extensions' CPU forms); it changes
nothing. The rules, in order (the first that applies decides):
  PASS           nothing to compute here: a tracing tensor (fake, functional) among the arguments, no
                 CUDA tensor (nor a CUDA factory), work captured into a CUDA graph, a FakeTensorMode
                 on, or a namespace whose CUDA side simcuda computes itself (the collectives);
  SUBCLASS       a tensor subclass with its own dispatch (DTensor, nested jagged): it runs next, and
                 the operations on plain tensors it makes come back to the mode;
  PYTHON_KERNEL  the CUDA kernel is Python code (vLLM's attention): it runs with the mode on;
  PYTHON_ANSWER  the result is a Python value (item, equal, is_nonzero): computed on the CPU only;
  CPU_FIRST      the output's size depends on values (dynamic_output_shape, boolean index_put,
                 masked_scatter_backward): the CPU computes first and the CUDA output is sized after;
  then the CUDA operation runs, and its outputs are
  CUDA_ONLY      left as the kernel left them: uninitialized factories (empty), metadata only;
  STAND_IN       the stand-in (observable: the heavy products);
  FORM_STAND_IN  the stand-in, for an extension's heavy operation with a CPU form (observable);
  FORM           computed by the extension's CPU form (vllm_forms.py);
  COMPUTE        computed by PyTorch's CPU kernel (or values.py's CPU form of a CUDA-only one).
An action's `aliasing` says the schema lets the output alias an input (a view, `to`, `reshape`):
then the executor computes only when the operation made a fresh tensor after all.
"""

import collections

PASS = "pass"
SUBCLASS = "subclass"
PYTHON_KERNEL = "python_kernel"
PYTHON_ANSWER = "python_answer"
CPU_FIRST = "cpu_first"
CUDA_ONLY = "cuda_only"
STAND_IN = "stand_in"
FORM_STAND_IN = "form_stand_in"
FORM = "form"
COMPUTE = "compute"

action = collections.namedtuple("action", "kind aliasing")

# What classify() needs to know of the process now: capturing() and faking() (callables: a stream
# capture, a FakeTensorMode), python_kernel(func) (whether its CUDA kernel was registered from
# Python), forms (schema name -> an extension's CPU form) and heavy_forms (the heavy ones' names).
context = collections.namedtuple("context", "capturing faking python_kernel forms heavy_forms")

# The heavy floating-point products: what the observable level does not compute (aten names, every
# overload). Their outputs get the stand-in instead.
HEAVY = frozenset((
    "mm", "bmm", "addmm", "addmv", "mv", "baddbmm", "addbmm", "dot", "vdot", "_addmm_activation",
    "_scaled_mm", "_int_mm", "_grouped_mm", "_scaled_grouped_mm",
    "convolution", "_convolution", "convolution_backward", "cudnn_convolution", "cudnn_convolution_transpose",
    "_conv_depthwise2d", "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
    "_flash_attention_forward", "_flash_attention_backward", "_efficient_attention_forward",
    "_efficient_attention_backward",
))
# Operator namespaces whose CUDA side simcuda itself computes: the collectives (simcuda's NCCL moves
# and reduces the real bytes).
COMPUTED_BY_SIMCUDA = frozenset(("c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor"))
# Operations that change only a tensor's metadata (or a stream's books): nothing to compute.
METADATA_ONLY = frozenset(("resize_", "resize_as_", "set_", "record_stream", "_resize_output_"))

_tables = {}


def _ops(torch):
    """The operator sets of this torch (made once)."""
    if not _tables:
        aten = torch.ops.aten
        _tables.update(
            # Fixed output size, but the CUDA form counts a mask's elements below the mode (masked_select).
            counts_inside={aten.masked_scatter_backward.default},
            index_puts={aten.index_put_.default, aten.index_put.default},  # boolean indices: nonzero inside
            python_answer={aten._local_scalar_dense.default, aten.item.default, aten.equal.default,
                           aten.is_nonzero.default},
            uninitialized={aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
                           aten.new_empty.default, aten.new_empty_strided.default},
        )
        from torch._subclasses.fake_tensor import FakeTensor
        from torch._subclasses.functional_tensor import FunctionalTensor

        _tables["tracing"] = (FakeTensor, FunctionalTensor)  # no memory: their modes trace
    return _tables


def is_cuda(torch, x):
    return isinstance(x, torch.Tensor) and x.device.type == "cuda"


def dispatches(torch, x):
    """Whether x is a tensor subclass with a __torch_dispatch__ of its own (DTensor, nested jagged
    tensors, ...). Subclasses without one (vLLM's parameter classes) are plain tensors here."""
    disabled = torch._C._disabled_torch_dispatch_impl
    return isinstance(x, torch.Tensor) and type(x) not in (torch.Tensor, torch.nn.Parameter) and \
        getattr(type(x), "__torch_dispatch__", disabled) is not disabled


def makes_cuda(torch, kwargs):
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "cuda"


def aliasing(func):
    """Whether func's schema lets an output alias an input without writing it (a view, `to`, ...)."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)


def writes_argument(func):
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def bool_indices(torch, args):
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


def classify(torch, func, args, kwargs, level, ctx):
    """The action for `func(*args, **kwargs)` at value level `level` ("observable" or "exact")."""
    from torch.utils._pytree import tree_flatten

    ops = _ops(torch)
    flat, _ = tree_flatten((args, kwargs))
    if any(isinstance(x, ops["tracing"]) for x in flat):
        return action(PASS, False)
    if any(dispatches(torch, x) for x in flat):
        return action(SUBCLASS, False)
    if not (any(is_cuda(torch, x) for x in flat) or makes_cuda(torch, kwargs)) or ctx.capturing() or \
            func.namespace in COMPUTED_BY_SIMCUDA or ctx.faking():
        return action(PASS, False)
    if ctx.python_kernel(func):
        return action(PYTHON_KERNEL, False)
    if func in ops["python_answer"]:
        return action(PYTHON_ANSWER, False)
    if torch.Tag.dynamic_output_shape in func.tags or func in ops["counts_inside"] or \
            (func in ops["index_puts"] and bool_indices(torch, args)):
        return action(CPU_FIRST, False)
    name = func._schema.name.split("::")[-1]
    if func in ops["uninitialized"] or name in METADATA_ONLY:
        return action(CUDA_ONLY, False)
    observable = level == "observable"
    view = aliasing(func)
    if observable and name in HEAVY:
        return action(STAND_IN, view)
    if func._schema.name in ctx.forms:
        return action(FORM_STAND_IN if observable and func._schema.name in ctx.heavy_forms else FORM, view)
    return action(COMPUTE, view)
