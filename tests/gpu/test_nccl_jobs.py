"""Multi-GPU jobs on NCCL, started as users start them: torchrun under phasealloc-run, with
phasealloc as the allocator and with PyTorch's own (--native). DDP and FSDP2 (fully_shard) of a tiny
random Llama on 2 and 4 GPUs, DeepSpeed ZeRO-2 and ZeRO-3 on 2, 3 training steps each
(nccl_job_rank.py), each rank from its own init, compared with a CPU reference of the same training
and across ranks; every rank says which allocator it ran. On the simulator the GPUs
are simulated (SIMCUDA_GPU=count:N) and so is NCCL (tools/simcuda/src/nccl): its collectives move
and reduce the real bytes between the ranks' processes, and its buffers are device memory outside
the allocator, which every rank sees in torch.cuda.mem_get_info.
"""

import importlib.util
import json
import os
import subprocess
import sys

from torch_harness import bridges, child_env, free_port, gpu_skip_reason, launcher, on_simulator

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import pytest
except ImportError:
    pytest = None

MIB = 1 << 20
CHANNELS = 4  # NCCL_MAX_NCHANNELS for the jobs: the model's buffers scale with it
STEPS = 3  # nccl_job_rank.py's training steps
# Against the CPU reference (float32; the device sums the ranks' gradients in another order than the
# reference): each step's loss, and each parameter after 3 AdamW steps of lr 1e-3 (which move the
# reference's parameters by about 3e-3).
LOSS_TOLERANCE = 1e-4
PARAM_TOLERANCE = 2e-5


def nccl_model_bytes(channels):
    """NCCL's collective buffers per rank as the simulator models them (tools/simcuda/src/nccl/README.md):
    per channel one receive connection of SIMPLE (NCCL_BUFFSIZE, 4 MiB) + LL (512 KiB) + LL128
    (4800 KiB) buffers, each allocation in whole 2 MiB pages."""
    connection = 4 * MIB + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8
    return channels * (-(-connection // (2 * MIB)) * 2 * MIB)


def run_job(mode, world, native, out_dir, conf="device:cuda_vmm"):
    env = child_env(conf)
    env["NCCL_MAX_NCHANNELS"] = str(CHANNELS)
    if on_simulator():
        # Training is compared with a CPU reference: the simulated GPU computes every product.
        env["SIMCUDA_GPU"] = "count:%d,quiet:1,values:exact" % world
    command = launcher()
    if on_simulator():
        command = [command[0], "--sim-gpu=16GiB"] + command[2:]
    if native:
        command.append("--native")
    command += ["--", sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world),
                "--master-port", str(free_port()),
                os.path.join(HERE, "nccl_job_rank.py"), mode, str(out_dir)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-8000:]
    return [json.loads((out_dir / ("rank%d.json" % r)).read_text()) for r in range(world)]


if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    JOBS = [("ddp", 2), ("ddp", 4), ("fsdp2", 2), ("fsdp2", 4), ("zero2", 2), ("zero3", 2)]
    # Every job under phasealloc but DDP at 4 ranks (the same code path as at 2), and DDP at 2 under
    # PyTorch's allocator, each submission; the rest in the weekly tier (tests/harness/tiers.py).
    PER_SUBMISSION = {("ddp", 2, False), ("ddp", 2, True), ("fsdp2", 2, False), ("fsdp2", 4, False),
                      ("zero2", 2, False), ("zero3", 2, False)}
    JOB_RUNS = [pytest.param(mode, world, native, id="%s-%d-%s" % (mode, world, "native" if native else "phasealloc"),
                             marks=[] if (mode, world, native) in PER_SUBMISSION else [pytest.mark.weekly])
                for mode, world in JOBS for native in (False, True)]

    @pytest.mark.parametrize("mode,world,native", JOB_RUNS)
    def test_training_on_nccl(mode, world, native, tmp_path):
        if mode.startswith("zero") and importlib.util.find_spec("deepspeed") is None:
            pytest.skip("DeepSpeed is not installed (tests/requirements.txt has it)")
        if not on_simulator():
            import torch

            if torch.cuda.device_count() < world:
                pytest.skip("real GPU only: needs %d GPUs, this machine has %d" % (world, torch.cuda.device_count()))
        if not native and "c10" not in bridges():
            # ProcessGroupNCCL's destructor asks the allocator for a snapshot, which
            # CUDAPluggableAllocator refuses (the process aborts).
            pytest.skip("phasealloc under NCCL needs the c10 bridge (built when the build saw torch)")
        results = run_job(mode, world, native, tmp_path)
        check_ranks(results, world, native)

    def test_fsdp2_under_offload_auto_trains_as_the_cpu_reference(tmp_path):
        """offload:auto steps FSDP2's AdamW a chunk at a time, its state DTensors moved through their
        local shards: the same losses and parameters as the CPU reference, on every rank."""
        if "c10" not in bridges():
            pytest.skip("phasealloc under NCCL needs the c10 bridge (built when the build saw torch)")
        results = run_job("fsdp2", 2, False, tmp_path, conf="device:cuda_vmm,offload:auto")
        check_ranks(results, 2, False)
        for r in results:
            counts = r["offload"]
            # Each chunk's state was sent to the host after its update (its pages left, or stayed
            # where they share a page with blocks that stay: this Llama is tiny).
            assert counts and counts["chunked_steps"] == STEPS, counts
            assert counts["page_bytes"] + counts["kept_bytes"] > 0, counts


def check_ranks(results, world, native):
    """What every rank of a job wrote (nccl_job_rank.py): exact collectives, the mode's initial
    parameters, the allocator asked inside the process, and training that matches the CPU reference."""
    expected_backend = "native" if native else "phasealloc"
    for rank, r in enumerate(results):
        assert r["rank"] == rank and r["world"] == world, r
        assert r["probe"] == float(world), r  # all-reduce of a host-copied 1.0 per rank
        assert all(r["exact"].values()), r["exact"]
        assert r["params_match"], r
        for when in ("allocator", "allocator_at_end"):
            assert r[when] == {"backend": expected_backend, "phasealloc_enabled": not native}, (rank, when, r[when])
        assert r["steps"] == STEPS and len(r["losses"]) == STEPS, r
        # Training computed something: the losses move from step to step, as the reference's do.
        assert len(set(r["losses"])) == STEPS, r["losses"]
        assert max(abs(a - b) for a, b in zip(r["losses"], r["reference_losses"])) <= LOSS_TOLERANCE, r
        trained = r["trained"]
        assert trained["reference_moved"] > 10 * PARAM_TOLERANCE, trained  # the comparison is not init vs init
        assert trained["max_abs_diff"] <= PARAM_TOLERANCE, (rank, trained)
        if on_simulator():
            # NCCL's buffers come from the device, outside the allocator, at the first collective.
            assert r["nccl_bytes"] == nccl_model_bytes(CHANNELS), r
        else:
            assert r["nccl_bytes"] >= 0, r
    # Data parallel: every rank ends with the same full parameters, bit for bit.
    assert len({r["trained"]["digest"] for r in results}) == 1, [r["trained"] for r in results]
