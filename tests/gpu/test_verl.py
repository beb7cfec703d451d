"""verl 0.9.1's PPO trainer (GRPO, FSDP actor and reference, vLLM 0.24 rollout servers) on 2
simulated GPUs and a local Ray cluster, unmodified, under PyTorch's allocator and under phasealloc
(verl_ppo_job.py starts it: a tiny random Llama, a local parquet dataset, 2 training steps).

verl's `vllm` extra pins torch 2.11 and vLLM 0.24, so it lives in its own venv, named by
PHASEALLOC_VERL_VENV (`tools/dev.sh verl` makes ~/.cache/phasealloc/venv-verl0.9.1, builds the
bridge against its torch and runs this file); the bridge is PHASEALLOC_VERL_LIBRARY (default
build*/torch-2.11.0/interpose/libphasealloc_torch.so). Skips with the reason when either is missing.
Too long and too memory-hungry for CI on a 2-core machine (a dozen Ray workers with torch loaded):
weekly, not in `tools/dev.sh test`.

Under phasealloc every process that allocates on a GPU writes its trace (PHASEALLOC_CONF
trace:rank%r.role%R.pid%p.patrace): the FSDP workers and the vLLM engines' workers each have one,
so each of them ran with phasealloc as its allocator.
"""

import os
import re
import shutil
import subprocess
import tempfile

from torch_harness import find_release_bridge, find_simulator, find_venv_python, launcher, on_simulator

try:
    import pytest
except ImportError:
    pytest = None

HERE = os.path.dirname(os.path.abspath(__file__))
VERL_TORCH = "2.11.0"
STEPS = 2


def verl_python():
    return find_venv_python("PHASEALLOC_VERL_VENV", "verl")


def verl_bridge():
    return find_release_bridge("PHASEALLOC_VERL_LIBRARY", VERL_TORCH)


def run_verl(native, work):
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
    command = launcher()
    if on_simulator():
        command = [command[0], "--sim-gpu=8GiB"] + command[2:]
    if native:
        command.append("--native")
    command += ["--", verl_python(), os.path.join(HERE, "verl_ppo_job.py"), str(work), str(STEPS)]
    try:
        # In the work folder: verl's Hydra writes its outputs/ folder into the working directory.
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600, cwd=str(work))
    finally:
        shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-8000:]
    return out.stdout + out.stderr


if pytest is not None and __name__ != "__main__":
    _REASON = "no GPU and no simulated GPU (build tools/simcuda)" if on_simulator() and not find_simulator() else None
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    @pytest.mark.parametrize("native", (True, False), ids=("native", "phasealloc"))
    def test_verl_grpo_steps(native, tmp_path):
        if verl_python() is None:
            pytest.skip("PHASEALLOC_VERL_VENV names no verl venv (tools/dev.sh verl makes one and runs this)")
        if not native and verl_bridge() is None:
            pytest.skip("no c10 bridge built against torch %s (tools/dev.sh verl builds it)" % VERL_TORCH)
        log = run_verl(native, tmp_path)
        steps = {int(s) for s in re.findall(r"step:(\d+) - ", log)}
        assert set(range(1, STEPS + 1)) <= steps, log[-6000:]
        if not native:
            assert "not enabled" not in log, log[-6000:]
            traces = os.listdir(tmp_path / "traces")
            assert len(traces) >= 2, traces  # at least the two FSDP workers, one per GPU
