"""OpenRLHF 0.11.2's colocated GRPO (tests/gpu/openrlhf_grpo.py), unmodified, on 2 simulated GPUs, on
the local Ray cluster OpenRLHF's driver starts, under PyTorch's allocator and under phasealloc.

The job's processes are OpenRLHF's and Ray's: the driver, Ray's GCS, raylet and agents, and the
actors (2 PolicyModelActor and 2 ReferenceModelActor DeepSpeed ranks, 2 RolloutRayActor vLLM engines
with their EngineCore processes, the PPOTrainer). They inherit the environment phasealloc-run sets on
the driver (Ray's workers are the raylet's children, and the raylet is the driver's). While the job
runs, the test reads /proc for every process of the job's session: its role (Ray's process title,
"ray::PolicyModelActor...", or vLLM's "VLLM::EngineCore"), whether it holds simulated device memory
(simcuda's memfd is mapped) and whether phasealloc's allocator is loaded in it (libphasealloc_c10.so,
the bridge phasealloc.enable() installs).

- test_workers_swap_in_phasealloc (the smoke): under PHASEALLOC=1 on the driver alone, every process
  that holds device memory has phasealloc loaded, and the DeepSpeed ranks and vLLM engines are among
  them. It stops the job once every role has been seen (about a minute and a half on 2 cores).
- test_grpo_two_steps: the whole job, 2 steps (sampled at temperature 1, rewarded, trained, weights
  sent to the engines), under PyTorch's allocator and under phasealloc.

Needs the OpenRLHF venv (PHASEALLOC_OPENRLHF_VENV; `tools/dev.sh openrlhf` makes it and runs this
file) and phasealloc's bridge built against its torch (PHASEALLOC_OPENRLHF_LIBRARY, default
build*/torch-2.13.0/interpose/libphasealloc_torch.so); skips with the reason without them. Each job
takes 5 to 8 GiB of host memory (nine Python processes with torch, vLLM and DeepSpeed; Ray's
memory monitor kills a worker when the machine passes 95%).
"""

import os
import subprocess
import tempfile

from job_processes import allocator_records, holder_counts, holders_not_running, record_env, refusals, run_watched
from openrlhf_grpo import command as job_command
from torch_harness import find_release_bridge, find_simulator, find_venv_python, launcher, on_simulator

try:
    import pytest
except ImportError:
    pytest = None

HERE = os.path.dirname(os.path.abspath(__file__))
OPENRLHF_TORCH = "2.13.0"
SIM_MEMORY = "2GiB"
# The processes that hold device memory: the DeepSpeed ranks, and the vLLM engines' cores (vLLM 0.29
# runs each engine's core in a process of its own, started by the RolloutRayActor).
ROLES = {"PolicyModelActor": 2, "ReferenceModelActor": 2, "EngineCore": 2}


def openrlhf_python():
    return find_venv_python("PHASEALLOC_OPENRLHF_VENV", "openrlhf")


def openrlhf_bridge():
    return find_release_bridge("PHASEALLOC_OPENRLHF_LIBRARY", OPENRLHF_TORCH)


def prepare(workdir, python):
    """The tiny model and the prompts, made by the OpenRLHF venv's torch on the simulated GPU."""
    command = launcher(SIM_MEMORY) + ["--native", "--", python, os.path.join(HERE, "openrlhf_grpo.py"), workdir]
    out = subprocess.run(command, env=job_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]


def job_env(native=True):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if on_simulator():
        env["PHASEALLOC_SIMCUDA_DIR"] = find_simulator()
        env["SIMCUDA_GPU"] = "count:2,quiet:1"
    if not native:
        env.update(PHASEALLOC_LIBRARY=openrlhf_bridge(), PHASEALLOC_BRIDGE="c10", PHASEALLOC_CONF="device:cuda_vmm")
    # vLLM 0.29's engine: the V1 model runner (the V2 runner samples with Triton kernels, which the
    # simulator does not compute), no FlashInfer sampler (not installed: it JIT-compiles).
    env.update(VLLM_USE_V2_MODEL_RUNNER="0", VLLM_USE_FLASHINFER_SAMPLER="0", VLLM_NO_USAGE_STATS="1",
               HF_HUB_OFFLINE="1", RAY_USAGE_STATS_ENABLED="0")
    return env


def run_job(workdir, native, stop_when_seen=False, timeout=900):
    """Runs the job in its own session, watching its processes (job_processes.py); returns (exit
    status, None when stopped once every role held memory, or "timed out ..."; output;
    {pid: (role, holds device memory)}; {pid: the allocator record each process wrote})."""
    command = launcher(SIM_MEMORY) + (["--native"] if native else [])
    command += ["--"] + job_command(workdir, openrlhf_python())
    log_path = os.path.join(workdir, "job-%s.log" % ("native" if native else "phasealloc"))

    def all_roles_seen(seen):
        counts = holder_counts(seen)
        return all(counts.get(name, 0) >= n for name, n in ROLES.items())

    records = tempfile.mkdtemp(prefix="records-", dir=workdir)
    status, output, seen = run_watched(command, record_env(job_env(native), records), workdir, log_path, timeout,
                                       stop_when=all_roles_seen if stop_when_seen else None)
    return status, output, seen, allocator_records(records)


if pytest is not None and __name__ != "__main__":
    _REASON = "no GPU and no simulated GPU (build tools/simcuda)" if on_simulator() and not find_simulator() else None
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    @pytest.fixture(scope="module")
    def workdir():
        if openrlhf_python() is None:
            pytest.skip("PHASEALLOC_OPENRLHF_VENV names no OpenRLHF venv (tools/dev.sh openrlhf makes one and runs this)")
        with tempfile.TemporaryDirectory(prefix="openrlhf-") as d:
            prepare(d, openrlhf_python())
            yield d

    def test_workers_swap_in_phasealloc(workdir):
        if openrlhf_bridge() is None:
            pytest.skip("no c10 bridge built against torch %s (tools/dev.sh openrlhf builds it)" % OPENRLHF_TORCH)
        status, output, seen, records = run_job(workdir, native=False, stop_when_seen=True, timeout=600)
        # Stopped once every role held memory: not failed, not timed out.
        assert status is None, (status, output[-6000:])
        assert not refusals(output), refusals(output)
        wrong = holders_not_running(seen, records, "phasealloc")
        assert not wrong, "processes that held device memory without phasealloc: %s\n%s" % (wrong, output[-6000:])
        counts = {name: holder_counts(seen).get(name, 0) for name in ROLES}
        assert counts == ROLES, (counts, sorted(set(v[0] for v in seen.values())), status, output[-6000:])

    @pytest.mark.parametrize("native", (True, False), ids=("native", "phasealloc"))
    def test_grpo_two_steps(workdir, native):
        if not native and openrlhf_bridge() is None:
            pytest.skip("no c10 bridge built against torch %s (tools/dev.sh openrlhf builds it)" % OPENRLHF_TORCH)
        status, output, seen, records = run_job(workdir, native=native)
        assert status == 0, output[-8000:]
        assert "Global step 1:" in output and "Global step 2:" in output, output[-8000:]
        assert "invalid token id" not in output, output[-8000:]  # vLLM returned real token ids
        assert set(ROLES) <= set(holder_counts(seen)), seen
        wrong = holders_not_running(seen, records, "native" if native else "phasealloc")
        assert not wrong, wrong
        if not native:
            assert not refusals(output), refusals(output)
