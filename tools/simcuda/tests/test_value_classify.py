"""value_classify.classify(), rule by rule: what the value mode does with an operation, decided from the
operation, its arguments and the process's state alone. Each scenario runs in a child on the simulated
GPU at values:off (the mode is not installed there, so the checks call classify() themselves on real
CUDA tensors)."""

import torch_harness

OFF = {"SIMCUDA_GPU": "quiet:1,values:off"}


def _context(**changes):
    from simcuda import value_classify as vc

    fields = dict(capturing=lambda: False, faking=lambda: False, python_kernel=lambda func: False, forms={},
                  heavy_forms=frozenset())
    fields.update(changes)
    return vc.context(**fields)


def scenario_what_runs_without_computing():
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from simcuda import value_classify as vc

    aten = torch.ops.aten
    x = torch.ones(4, device="cuda")
    ctx = _context()
    classify = vc.classify
    assert classify(torch, aten.add.Tensor, (torch.ones(4), torch.ones(4)), {}, "exact", ctx).kind == vc.PASS  # CPU only
    assert classify(torch, aten.add.Tensor, (x, x), {}, "exact", _context(capturing=lambda: True)).kind == vc.PASS
    assert classify(torch, aten.add.Tensor, (x, x), {}, "exact", _context(faking=lambda: True)).kind == vc.PASS
    with FakeTensorMode():
        fake = torch.empty(4, device="cuda")
    assert classify(torch, aten.add.Tensor, (fake, fake), {}, "exact", ctx).kind == vc.PASS
    reduce = torch.ops._c10d_functional.all_reduce.default  # simcuda's NCCL computes the collectives
    assert classify(torch, reduce, (x, "sum", "0"), {}, "exact", ctx).kind == vc.PASS
    # A CUDA factory with no tensor argument is computed; an uninitialized one is not.
    assert classify(torch, aten.arange.default, (4,), {"device": torch.device("cuda")}, "exact", ctx) == \
        vc.action(vc.COMPUTE, False)
    assert classify(torch, aten.empty.memory_format, ([4],), {"device": torch.device("cuda")}, "exact",
                    ctx).kind == vc.CUDA_ONLY
    assert classify(torch, aten.set_.source_Tensor, (x, x), {}, "exact", ctx).kind == vc.CUDA_ONLY
    return True


def scenario_where_values_decide_the_size_or_reach_the_host():
    import torch
    from simcuda import value_classify as vc

    aten = torch.ops.aten
    x = torch.ones(4, device="cuda")
    ctx = _context()
    assert vc.classify(torch, aten.item.default, (x[:1],), {}, "observable", ctx).kind == vc.PYTHON_ANSWER
    assert vc.classify(torch, aten.nonzero.default, (x,), {}, "observable", ctx).kind == vc.CPU_FIRST
    mask = torch.ones(4, dtype=torch.bool, device="cuda")
    where = torch.arange(4, device="cuda")
    assert vc.classify(torch, aten.index_put_.default, (x, [mask], x), {}, "exact", ctx).kind == vc.CPU_FIRST
    assert vc.classify(torch, aten.index_put_.default, (x, [where], x), {}, "exact", ctx).kind == vc.COMPUTE
    return True


def scenario_levels_forms_kernels_and_subclasses():
    import torch
    from simcuda import value_classify as vc

    aten = torch.ops.aten
    a = torch.ones(2, 2, device="cuda")
    ctx = _context()
    # The heavy products: the stand-in at observable, computed at exact; the rest computed at both.
    assert vc.classify(torch, aten.mm.default, (a, a), {}, "observable", ctx) == vc.action(vc.STAND_IN, False)
    assert vc.classify(torch, aten.mm.default, (a, a), {}, "exact", ctx) == vc.action(vc.COMPUTE, False)
    assert vc.classify(torch, aten.add.Tensor, (a, a), {}, "observable", ctx) == vc.action(vc.COMPUTE, False)
    # An operation whose output may alias its input is computed only when it made a fresh tensor.
    assert vc.classify(torch, aten.view.default, (a, [4]), {}, "exact", ctx) == vc.action(vc.COMPUTE, True)
    # An extension's operation with a CPU form; a heavy one gets the stand-in at observable.
    forms = _context(forms={"aten::mul": print}, heavy_forms=frozenset({"aten::mul"}))
    assert vc.classify(torch, aten.mul.Tensor, (a, a), {}, "exact", forms).kind == vc.FORM
    assert vc.classify(torch, aten.mul.Tensor, (a, a), {}, "observable", forms).kind == vc.FORM_STAND_IN
    # A CUDA kernel written in Python runs with the mode on.
    python = _context(python_kernel=lambda func: func is aten.add.Tensor)
    assert vc.classify(torch, aten.add.Tensor, (a, a), {}, "exact", python).kind == vc.PYTHON_KERNEL

    class own_dispatch(torch.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    sub = torch.Tensor._make_subclass(own_dispatch, a)
    assert vc.classify(torch, aten.add.Tensor, (sub, a), {}, "exact", ctx).kind == vc.SUBCLASS
    parameter = torch.nn.Parameter(a)  # a subclass without a dispatch of its own is a plain tensor
    assert vc.classify(torch, aten.add.Tensor, (parameter, a), {}, "exact", ctx).kind == vc.COMPUTE
    return True


def test_what_runs_without_computing():
    assert torch_harness.run(__file__, "what_runs_without_computing", env=OFF)


def test_where_values_decide_the_size_or_reach_the_host():
    assert torch_harness.run(__file__, "where_values_decide_the_size_or_reach_the_host", env=OFF)


def test_levels_forms_kernels_and_subclasses():
    assert torch_harness.run(__file__, "levels_forms_kernels_and_subclasses", env=OFF)


if __name__ == "__main__":
    torch_harness.child_main(globals())
