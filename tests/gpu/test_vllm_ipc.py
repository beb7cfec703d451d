"""CUDA IPC weight sync from a trainer process to a vLLM engine in another process (the verl/OpenRLHF
pattern; vllm_ipc_sync.py is the child): the trainer under phasealloc and under PyTorch's allocator,
in the vLLM venv (test_vllm.py says how it is found; `tools/dev.sh vllm` runs this file).

It asserts that the engine, after loading the handles through vLLM 0.33's IPC weight-transfer
backend, holds the trainer's weights bit for bit, every one of them changed from the checkpoint,
and that its greedy tokens follow them: at values:exact each is the CPU's greedy choice for its
prefix (vllm_rollout.greedy_deficits), with the checkpoint before the update and with the new
weights after it (whose greedy tokens on the CPU differ)."""

import os

import torch_harness
from test_vllm import VLLM_ENV, VLLM_TORCH, vllm_bridge, vllm_python
from torch_harness import on_simulator
from vllm_rollout import GREEDY_TOLERANCE

try:
    import pytest
except ImportError:
    pytest = None

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vllm_ipc_sync.py")
PARAMETERS = 15  # the 2-layer Llama of vllm_rollout.py in vLLM's layout (qkv and gate_up stacked)


def run_sync(native):
    env = dict(VLLM_ENV, SIMCUDA_GPU="quiet:1,values:exact")
    if not native:
        env["PHASEALLOC_LIBRARY"] = vllm_bridge()
    return torch_harness.run(CHILD, "ipc_weight_sync", sim_gpu="4GiB", native=native,
                             conf=None if native else "device:cuda_vmm", bridge="c10", env=env, python=vllm_python())


if pytest is not None and __name__ != "__main__":
    pytestmark = [pytest.mark.skipif(not on_simulator(), reason="runs on the simulated GPU (two processes, one GPU)")]

    # Under PyTorch's allocator (the simulator's own check) in the weekly tier (tests/harness/tiers.py).
    @pytest.mark.parametrize("native", (False, pytest.param(True, marks=pytest.mark.weekly)), ids=("phasealloc", "native"))
    def test_trainer_weights_reach_a_vllm_engine_in_another_process_over_cuda_ipc(native):
        if vllm_python() is None:
            pytest.skip("PHASEALLOC_VLLM_VENV names no vLLM venv (tools/dev.sh vllm makes one and runs this)")
        if not native and vllm_bridge() is None:
            pytest.skip("no c10 bridge built against torch %s (tools/dev.sh vllm builds it)" % VLLM_TORCH)
        r = run_sync(native)
        assert r["phasealloc_enabled"] is (not native), r
        assert (r["trainer_allocator"] == "native") is native and (r["engine_allocator"] == "native") is native, r
        assert r["engine_exit"] == 0, r
        assert r["parameters"] == PARAMETERS and len(r["engine_parameters"]) == PARAMETERS, r
        assert r["differ"] == [], r  # the engine holds the trainer's weights, bit for bit
        assert r["unchanged"] == [], r  # and every one of them replaced the checkpoint's
        assert len(r["tokens_before"]) == len(r["tokens_after"]) == r["max_tokens"], r
        reference = r["reference_tokens"]
        assert reference["before"] != reference["after"], reference  # the update changes what is generated
        for when in ("before", "after"):
            assert max(r["deficits"][when]) <= GREEDY_TOLERANCE, (when, r["tokens_" + when], r["deficits"][when],
                                                                  reference[when])
