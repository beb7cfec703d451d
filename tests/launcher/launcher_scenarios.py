"""Child side of test_launcher.py: what a process started by phasealloc-run --sim-gpu sees."""

import os
import subprocess
import sys

from torch_harness import child_main
from simcuda.introspect import simulator

MIB = 1 << 20


def scenario_swap():
    import torch

    sim = simulator()
    tensors = [torch.empty(n * MIB, dtype=torch.uint8, device="cuda") for n in (1, 7, 64, 300)]
    host = torch.arange(4096, dtype=torch.float32)
    intact = bool(torch.equal(host.cuda().cpu(), host))
    result = {
        "backend": torch.cuda.memory.get_allocator_backend(),
        "reserved": torch.cuda.memory_reserved(),
        "mapped": sim.mapped(0),
        "allocated": torch.cuda.memory_allocated(),
        "intact": intact,
        "unemulated": sim.counters()["unemulated_calls"],
    }
    if result["backend"] != "native":
        import phasealloc

        result["summary"] = phasealloc.summary()
    del tensors
    return result


def scenario_children():
    """The launcher's environment reaches a grandchild: it sees the same simulated GPU."""
    code = "import torch; p = torch.cuda.get_device_properties(0); print(p.name, p.total_memory)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {"child": out.stdout.strip()}


if __name__ == "__main__":
    child_main(globals())
