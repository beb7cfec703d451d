"""The harness of the c10 bridge's tests (tests/gpu/test_bridge_*.py): each scenario runs twice, under
PyTorch's native allocator and under phasealloc (the c10 bridge), and asserts what PyTorch does. A
scenario that passes natively and fails under phasealloc is a difference to fix.

A bridge test file defines its scenarios (torch_harness's child protocol), an ENVIRONMENT of
variables some of them need, then calls bridge_tests(globals(), ENVIRONMENT) for the pytest side
and, under `if __name__ == "__main__":`, bridge_child_main(globals()). Contents are never read
through kernels (the simulated GPU skips them); copies are real.
"""

import os

from torch_harness import bridge_built, child_main, gpu_skip_reason, run, scenarios

MIB = 1 << 20
GIB = 1 << 30


def on_device(torch, host):
    """`host` copied to the GPU: a real write on a real or a simulated GPU."""
    return host.to("cuda")


def phasealloc_active(torch):
    return torch.cuda.memory.get_allocator_backend() == "phasealloc"


def bridge_tests(namespace, environment=None):
    """Adds to a test module (its globals) test_bridge_matches_pytorch over its scenarios and both
    allocators, and its skip mark."""
    import pytest

    reason = gpu_skip_reason()
    namespace["pytestmark"] = [pytest.mark.skipif(reason is not None, reason=reason or "")]
    test_file = namespace["__file__"]
    environment = environment or {}

    @pytest.mark.parametrize("allocator", ["native", "phasealloc"])
    @pytest.mark.parametrize("scenario", sorted(scenarios(namespace)))
    def test_bridge_matches_pytorch(scenario, allocator):
        if allocator == "phasealloc" and not bridge_built():
            pytest.skip("the c10 bridge was not built")
        env = dict(environment.get(scenario, {}), PHASEALLOC_TEST_ALLOCATOR=allocator)
        run(test_file, scenario, sim_gpu=None, native=allocator == "native", conf="", bridge="c10", env=env)

    namespace["test_bridge_matches_pytorch"] = test_bridge_matches_pytorch


def bridge_child_main(namespace):
    """The child's entry: checks that the process has the allocator the test asked for (a fallback
    to another fails the test), then runs the scenario."""
    import torch

    expected = os.environ["PHASEALLOC_TEST_ALLOCATOR"]
    torch.empty(1, device="cuda")
    backend = torch.cuda.memory.get_allocator_backend()
    assert backend == expected, "expected %s as the allocator, got %s" % (expected, backend)
    child_main(namespace, "torch", "phasealloc")
