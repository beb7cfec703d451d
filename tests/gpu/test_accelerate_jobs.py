"""TRL's GRPOTrainer under `accelerate launch` on 2 GPUs, started as users start it: phasealloc-run,
then accelerate's launcher, with phasealloc as the allocator and with PyTorch's own (--native).
On the simulator both GPUs and NCCL are simulated (SIMCUDA_GPU=count:2) at the exact value level,
and the job is compared, step by step, with the same job on the CPU (two processes under torchrun,
accelerate's multi-CPU state, DDP over gloo: PyTorch's CPU kernels, the same seeds; the simulator
draws samples as the CPU does): the losses, the gradient norms and the rewards, which move from step
to step (trl_grpo_rank.py)."""

import importlib.util
import json
import os
import subprocess
import sys

from torch_harness import bridges, child_env, gpu_skip_reason, launcher, on_simulator

try:
    import pytest
except ImportError:
    pytest = None

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 2


# Against the CPU reference: the device computes with the CPU's kernels at the exact level; the
# margin is for the order of DDP's sums.
RELATIVE_TOLERANCE = 1e-5


def run_grpo(native, out_dir, cpu=False):
    """The job's processes' records; cpu: the CPU reference (simcuda only supplies torch's CUDA
    libraries there: nothing runs on the device)."""
    env = child_env("device:cuda_vmm")
    if on_simulator():
        env["SIMCUDA_GPU"] = "count:%d,quiet:1,values:exact" % WORLD
    command = launcher()
    if on_simulator():
        command = [command[0], "--sim-gpu=16GiB"] + command[2:]
    if native or cpu:
        command.append("--native")
    port = str(31500 + (os.getpid() * 7 + (1 if native else 0) + (2 if cpu else 0)) % 2000)
    if cpu:  # accelerate's --cpu starts one process; under torchrun its state is multi-CPU (gloo)
        command += ["--", sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(WORLD),
                    "--master-port", port, os.path.join(HERE, "trl_grpo_rank.py"), str(out_dir), "--cpu"]
    else:
        command += ["--", sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
                    str(WORLD), "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                    "--main_process_port", port, os.path.join(HERE, "trl_grpo_rank.py"), str(out_dir)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-8000:]
    return [json.loads((out_dir / ("rank%d.json" % r)).read_text()) for r in range(WORLD)]


if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    # Under PyTorch's allocator (the simulator's own check of the job) in the weekly tier only
    # (tests/harness/tiers.py).
    @pytest.mark.parametrize("native", (False, pytest.param(True, marks=pytest.mark.weekly)),
                             ids=("phasealloc", "native"))
    def test_trl_grpo_under_accelerate_on_two_gpus(native, tmp_path):
        if importlib.util.find_spec("trl") is None:
            pytest.skip("TRL is not installed (tests/requirements.txt has it)")
        if not on_simulator():
            import torch

            if torch.cuda.device_count() < WORLD:
                pytest.skip("real GPU only: needs %d GPUs, this machine has %d" % (WORLD, torch.cuda.device_count()))
        if not native and "c10" not in bridges():
            pytest.skip("phasealloc under NCCL needs the c10 bridge (built when the build saw torch)")
        results = run_grpo(native, tmp_path)
        for rank, r in enumerate(results):
            assert (r["rank"], r["world"], r["steps"]) == (rank, WORLD, 3), r
            assert r["ddp"] == "DistributedDataParallel", r  # accelerate wrapped the policy in DDP
            assert r["allocator"] == ("native" if native else "phasealloc"), r
            assert len(r["log"]) == 3 and len(r["local_rewards"]) == 3, r
        # The logged reward of each step is the mean over every process's completions: the gather
        # moved them. Each process scored different completions, so no process could log it alone.
        for step in range(3):
            everyone = results[0]["local_rewards"][step] + results[1]["local_rewards"][step]
            for r in results:
                assert r["log"][step]["reward"] == pytest.approx(sum(everyone) / len(everyone), abs=1e-5), (step, r)
        assert any(results[0]["local_rewards"][s] != results[1]["local_rewards"][s] for s in range(3)), results
        if on_simulator():
            reference_dir = tmp_path / "cpu"
            reference_dir.mkdir()
            reference = run_grpo(False, reference_dir, cpu=True)
            check_against_the_cpu(results, reference)


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= RELATIVE_TOLERANCE * max(1.0, abs(b))


def check_against_the_cpu(results, reference):
    """Each process's logged loss, gradient norm and reward, step by step, are the CPU job's, and
    the reference moves (a constant would compare equal whatever the device computed)."""
    assert len({h["loss"] for h in reference[0]["log"]}) == 3, reference[0]["log"]
    for rank, (mine, cpu) in enumerate(zip(results, reference)):
        assert cpu["ddp"] == "DistributedDataParallel", cpu
        for step, (h, c) in enumerate(zip(mine["log"], cpu["log"])):
            for key in ("loss", "grad_norm", "reward"):
                assert close(h[key], c[key]), (rank, step, key, h[key], c[key])
        assert mine["local_rewards"] == cpu["local_rewards"], (rank, mine["local_rewards"], cpu["local_rewards"])
