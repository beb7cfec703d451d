"""verl 0.9.1's PPO trainer (GRPO, FSDP actor and reference, vLLM 0.24 rollout servers) on 2
simulated GPUs and a local Ray cluster, unmodified, under PyTorch's allocator and under phasealloc
(verl_ppo_job.py starts it: a tiny random Llama, a local parquet dataset, 2 training steps).

verl's `vllm` extra pins torch 2.11 and vLLM 0.24, so it lives in its own venv, named by
PHASEALLOC_VERL_VENV (`tools/dev.sh verl` makes ~/.cache/phasealloc/venv-verl0.9.1, builds the
bridge against its torch and runs this file); the bridge is PHASEALLOC_VERL_LIBRARY (default
build*/torch-2.11.0/interpose/libphasealloc_torch.so). Skips with the reason when either is missing.
The whole job (test_verl_grpo_steps, both allocators, about 2.5 min each) is too long for CI on a
2-core machine (a dozen Ray workers with torch loaded): `tools/dev.sh verl`, weekly. CI runs the
smoke (test_workers_swap_in_phasealloc: the job under phasealloc until every worker holds device
memory, about 80 s).

While the job runs, the test watches every process of its session (job_processes.py): the processes
that hold simulated device memory are verl's two FSDP workers (Ray actor WorkerDict, one per GPU) and
vLLM's two model workers (VLLM::Worker, one per rollout server). Under phasealloc each of them must
have phasealloc's allocator loaded and leave its trace (PHASEALLOC_CONF
trace:rank%r.role%R.pid%p.patrace; %R is the role the process title gives: WorkerDict, Worker), though
Ray ends them with SIGKILL: phasealloc checkpoints traces at phase transitions. Under PyTorch's
allocator none has phasealloc loaded.
"""

import os
import re
import shutil
import tempfile

from job_processes import allocator_records, holder_counts, holders_not_running, record_env, refusals, run_watched
from torch_harness import find_release_bridge, find_simulator, find_venv_python, launcher, on_simulator

try:
    import pytest
except ImportError:
    pytest = None

HERE = os.path.dirname(os.path.abspath(__file__))
VERL_TORCH = "2.11.0"
STEPS = 2
# The processes that hold device memory: verl's FSDP workers and vLLM's model workers, one per GPU each.
ROLES = {"WorkerDict": 2, "Worker": 2}


def verl_python():
    return find_venv_python("PHASEALLOC_VERL_VENV", "verl")


def verl_bridge():
    return find_release_bridge("PHASEALLOC_VERL_LIBRARY", VERL_TORCH)


def run_verl(native, work, stop_when=None):
    """Runs the job (job_processes.run_watched); returns (exit status, None when stop_when stopped
    it, or "timed out ..."; output; {pid: (role, held device memory)}; {pid: the allocator record
    each process wrote})."""
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.pop("PYTORCH_ALLOC_CONF", None)
    if not native:
        env.update(PHASEALLOC_LIBRARY=verl_bridge(), PHASEALLOC_BRIDGE="c10",
                   PHASEALLOC_CONF="trace:[%s]" % os.path.join(str(work), "traces", "rank%r.role%R.pid%p.patrace"))
    if on_simulator():
        env["PHASEALLOC_SIMCUDA_DIR"] = find_simulator()
        env["SIMCUDA_GPU"] = "count:2,quiet:1"
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1",
               VLLM_USE_FLASHINFER_SAMPLER="0")  # FlashInfer's sampler JIT-compiles with nvcc
    env["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="pa-ray-", dir="/tmp")  # Ray's socket paths stay short
    # Ray's memory monitor kills a worker above 95% of the host's memory; the job's dozen Python
    # processes with torch (two vLLM workers at 3 GB each) pass it on a 24 GiB machine.
    env.setdefault("RAY_memory_usage_threshold", "0.99")
    command = launcher()
    if on_simulator():
        command = [command[0], "--sim-gpu=8GiB"] + command[2:]
    if native:
        command.append("--native")
    command += ["--", verl_python(), os.path.join(HERE, "verl_ppo_job.py"), str(work), str(STEPS)]
    try:
        # In the work folder: verl's Hydra writes its outputs/ folder into the working directory.
        records = os.path.join(str(work), "allocator-records")
        status, log, seen = run_watched(command, record_env(env, records), str(work), os.path.join(str(work), "job.log"),
                                        timeout=1800, stop_when=stop_when)
        return status, log, seen, allocator_records(records)
    finally:
        shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)


def all_roles_hold_memory(seen):
    counts = holder_counts(seen)
    return all(counts.get(name, 0) >= n for name, n in ROLES.items())


if pytest is not None and __name__ != "__main__":
    _REASON = "no GPU and no simulated GPU (build tools/simcuda)" if on_simulator() and not find_simulator() else None
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    def need(native):
        if verl_python() is None:
            pytest.skip("PHASEALLOC_VERL_VENV names no verl venv (tools/dev.sh verl makes one and runs this)")
        if not native and verl_bridge() is None:
            pytest.skip("no c10 bridge built against torch %s (tools/dev.sh verl builds it)" % VERL_TORCH)

    def test_workers_swap_in_phasealloc(tmp_path):
        """The smoke (CI): the job runs until verl's FSDP workers and vLLM's model workers all hold
        device memory, each with phasealloc loaded."""
        need(False)
        status, log, seen, records = run_verl(False, tmp_path, stop_when=all_roles_hold_memory)
        # Stopped once every role held memory: not failed, not timed out.
        assert status is None, (status, log[-6000:])
        assert not refusals(log), refusals(log)
        wrong = holders_not_running(seen, records, "phasealloc")
        assert not wrong, "processes that held device memory without phasealloc: %s\n%s" % (wrong, log[-6000:])
        counts = holder_counts(seen)
        assert {name: counts.get(name, 0) for name in ROLES} == ROLES, (counts, status, log[-6000:])

    @pytest.mark.parametrize("native", (True, False), ids=("native", "phasealloc"))
    def test_verl_grpo_steps(native, tmp_path):
        need(native)
        status, log, seen, records = run_verl(native, tmp_path)
        assert status == 0, log[-12000:]
        steps = {int(s) for s in re.findall(r"step:(\d+) - ", log)}
        assert set(range(1, STEPS + 1)) <= steps, log[-6000:]
        counts = holder_counts(seen)
        assert {name: counts.get(name, 0) for name in ROLES} == ROLES, (counts, seen)
        wrong = holders_not_running(seen, records, "native" if native else "phasealloc")
        assert not wrong, "processes that held device memory with another allocator: %s" % wrong
        if native:
            return
        assert not refusals(log), refusals(log)
        # Every device-memory holder left its trace, named by its role.
        traces = sorted(os.listdir(tmp_path / "traces"))
        holders = {pid: v[0] for pid, v in seen.items() if v[1]}
        named = {int(re.search(r"\.pid(\d+)\.", t).group(1)): re.search(r"\.role([^.]*)\.", t).group(1) for t in traces}
        assert {pid: named.get(pid) for pid in holders} == holders, (traces, holders)
