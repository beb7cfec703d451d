"""TRL's GRPOTrainer with vLLM colocated in its process, sleep mode on (trl_colocate.py is the child),
under PyTorch's allocator and under phasealloc, in the vLLM venv (test_vllm.py says how it is found;
`tools/dev.sh vllm` runs this file).

What it asserts: the job runs its steps under both allocators; phase detection sees vLLM's
wake-ups, generation and sleep and the trainer's phases; and with phasealloc more of the trainer's
pages are back on the device before vLLM wakes its KV cache: at each wake-up after a training step
the device holds fewer bytes besides vLLM's pool (the simulated GPU's mapped bytes less the pool's
own mapped bytes), and the device total is no higher, than under PyTorch's allocator.

What it does not assert: a lower device total at wake-up. On this job it is equal (1242 MiB both,
4 GiB simulated GPU): TRL calls torch.cuda.empty_cache() before it wakes vLLM and vLLM's wake_up
calls it again, so PyTorch's allocator returns every free segment too; what is left is live (97
MiB: three 32 MiB cuBLAS workspaces, one per handle and stream that ran a matmul, the trainer's and
vLLM's, and 1 MiB of tensors) plus what sits in partly used segments, 7 MiB with PyTorch's
allocator and 5 MiB with phasealloc. vLLM sized its KV
cache from the free memory at its start, where phasealloc held one 2 MiB page less, so its pool is
that page larger and the totals meet.
"""

import os

import torch_harness
from test_vllm import VLLM_ENV, VLLM_TORCH, vllm_bridge, vllm_python
from torch_harness import on_simulator

try:
    import pytest
except ImportError:
    pytest = None

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "trl_colocate.py")
SIM_GPU = "4GiB"
STEPS = 3


def run_colocated(native, expandable_segments=False, conf="device:cuda_vmm", job=None, expect_ok=True):
    """The child's report under PyTorch's allocator (native; with expandable_segments when asked) or
    phasealloc (the c10 bridge built against vLLM's torch, PHASEALLOC_CONF `conf`); `job`: the
    child's TRL_COLOCATE_* sizes (expect_ok=False: the finished process)."""
    env = dict(VLLM_ENV, **(job or {}))
    if not native:
        env["PHASEALLOC_LIBRARY"] = vllm_bridge()
    if expandable_segments:
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    return torch_harness.run(CHILD, "colocate", sim_gpu=SIM_GPU, native=native,
                             conf=None if native else conf, bridge="c10", env=env,
                             python=vllm_python(), expect_ok=expect_ok)


# A trainer large beside vLLM's pool: a Llama of about 47 M parameters (fp32: its AdamW state about
# 360 MiB) and vLLM taking 0.9 of the 4 GiB simulated GPU. vLLM sizes its pool at its start, before
# the trainer's optimizer state exists, so from the second step its wake-up no longer fits.
LARGE_TRAINER = {"TRL_COLOCATE_LLAMA": '{"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4, '
                                       '"num_attention_heads": 16, "num_key_value_heads": 8}',
                 "TRL_COLOCATE_UTILIZATION": "0.9"}


if pytest is not None and __name__ != "__main__":
    pytestmark = [pytest.mark.skipif(not on_simulator(), reason="the device totals are read from the simulated GPU")]

    @pytest.fixture(scope="module")
    def reports():
        if vllm_python() is None:
            pytest.skip("PHASEALLOC_VLLM_VENV names no vLLM venv (tools/dev.sh vllm makes one and runs this)")
        if vllm_bridge() is None:
            pytest.skip("no c10 bridge built against torch %s (tools/dev.sh vllm builds it)" % VLLM_TORCH)
        return {"native": run_colocated(True), "phasealloc": run_colocated(False)}

    @pytest.mark.parametrize("allocator", ("native", "phasealloc"))
    def test_colocated_grpo_runs_with_vllm_asleep_between_rollouts(reports, allocator):
        r = reports[allocator]
        assert (r["allocator"] == "native") == (allocator == "native"), r["allocator"]
        assert r["steps"] == STEPS and len(r["losses"]) == STEPS, r
        assert r["completions"] == [4] * STEPS, r  # one prompt, num_generations=4, per step
        assert len(r["wakes"]) == STEPS, r  # the KV cache woke once per rollout
        # vLLM's sleep pool: the segments never change after the engine's start (so the trainer's
        # figures, reserved less those segments, are comparable), and the whole pool is mapped at
        # each wake-up, the same bytes every time.
        assert len(r["pool_segments"]) == 1, r["pool_segments"]
        assert len({w["pool"] for w in r["wakes"]}) == 1 and r["wakes"][0]["pool"] > 0, r["wakes"]
        # The books agree: at a wake-up the device holds the trainer's allocator and the pool.
        for w in r["wakes"]:
            assert w["device"] == w["trainer"] + w["pool"] + w["nccl"], w
        # Asleep, the pool is returned (level 2: weights and KV cache).
        assert r["phases"]["sleep"]["pool"] < r["phases"]["generation"]["pool"], r["phases"]

    @pytest.mark.parametrize("allocator", ("native", "phasealloc"))
    def test_phase_detection_sees_vllm_and_the_trainer(reports, allocator):
        r = reports[allocator]
        sequence = r["sequence"]
        # Per step: wake-up and generation, sleep, scoring, training, the optimizer step.
        for phase in ("generation", "sleep", "inference", "training", "optimizer"):
            assert sequence.count(phase) >= STEPS, sequence
        first = sequence.index("generation")
        assert sequence[first:first + 5] == ["generation", "sleep", "inference", "training", "optimizer"], sequence
        if allocator == "phasealloc":
            assert {"generation", "sleep", "training", "optimizer"} <= set(r["library_phases"]), r["library_phases"]

    def test_offload_pressure_makes_room_for_vllm_to_wake(reports):
        """With a trainer whose state grows after vLLM sized its pool, vLLM's second wake-up runs out of
        device memory under PyTorch's allocator and under phasealloc without offload (vLLM maps its
        pool with its own driver calls); under offload:pressure phasealloc sends the trainer's idle
        state (AdamW's, untouched while generating) to the host first, and every step runs."""
        for native, conf in ((True, None), (False, "device:cuda_vmm")):
            out = run_colocated(native, conf=conf, job=LARGE_TRAINER, expect_ok=False)
            assert out.returncode != 0 and "CUDA Error: out of memory" in out.stderr, (
                "the wake-up fits without offload (%s): the premise fails" % (conf or "native"), out.stderr[-3000:])
        r = run_colocated(False, conf="device:cuda_vmm,offload:pressure", job=LARGE_TRAINER)
        assert r["steps"] == STEPS and len(r["wakes"]) == STEPS, r
        counts = r["offload_counts"]
        assert counts["engine_wakes"] >= STEPS - 1 and counts["engine_wakes_relieved"] >= 1, counts
        assert r["offloads"] > 0, r
        # At each wake after a step, the trainer's allocator holds less than its live bytes: the rest
        # is on the host while vLLM generates.
        assert all(w["trainer"] < w["trainer_allocated"] for w in r["wakes"][1:]), r["wakes"]

    def test_phasealloc_returns_the_trainers_pages_before_vllm_wakes(reports):
        native, ours = reports["native"], reports["phasealloc"]
        # The wake-ups after a training step (the first comes before any). What the device holds
        # besides vLLM's pool is read from the simulator (its mapped bytes) and vLLM's books (the
        # pool's), not from the allocator under test.
        for n, p in zip(native["wakes"][1:], ours["wakes"][1:]):
            assert p["device"] - p["pool"] < n["device"] - n["pool"], (n, p)
            assert p["device"] <= n["device"], (n, p)
        # While the trainer works (vLLM asleep), the device total is lower too.
        for phase in ("inference", "training", "optimizer"):
            assert ours["phases"][phase]["device"] < native["phases"][phase]["device"], (native, ours)
