"""vLLM as an RLHF rollout engine: one engine's start (KV cache sized from the device's free memory),
generation, sleep(level=1) and sleep(level=2) with their wake-ups, in one process, under PyTorch's
allocator and under phasealloc (vllm_rollout.py is the child).

vLLM pins its own torch (vLLM 0.33: torch 2.14.0), so it lives in its own venv, named by
PHASEALLOC_VLLM_VENV (`tools/dev.sh vllm` makes ~/.cache/phasealloc/venv-vllm0.33, builds the
bridge and runs this file with it; the suite of tests/gpu run without it skips these), and
phasealloc's c10 bridge must be built against that torch (PHASEALLOC_VLLM_LIBRARY, default
build*/torch-2.14.0/interpose/libphasealloc_torch.so, which `tools/dev.sh vllm` builds). Skips with
the reason when either is missing.
"""

import atexit
import json
import os
import shutil
import subprocess
import tempfile

from torch_harness import find_release_bridge, find_simulator, find_venv_python, launcher, on_simulator

try:
    import pytest
except ImportError:
    pytest = None

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1 << 30
SIM_MEMORY = 4 * GIB
VLLM_TORCH = "2.14.0"


def vllm_python():
    return find_venv_python("PHASEALLOC_VLLM_VENV", "vllm")


def vllm_bridge():
    return find_release_bridge("PHASEALLOC_VLLM_LIBRARY", VLLM_TORCH)


# The environment of a vLLM child on the simulated GPU: the engine core in this process (its GPU is
# the simulated one the launcher set up), PyTorch's sampler (FlashInfer's JIT-compiles with nvcc),
# nothing from the network.
VLLM_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_USE_FLASHINFER_SAMPLER": "0", "VLLM_NO_USAGE_STATS": "1",
            "HF_HUB_OFFLINE": "1",
            # Triton's kernel cache, fresh for this test session: the first child compiles every
            # kernel, as on a new machine (a warm ~/.triton/cache once hid a compile that broke
            # after an interpreted launch, tools/simcuda's triton_values.py).
            "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="phasealloc-triton-cache-")}
atexit.register(shutil.rmtree, VLLM_ENV["TRITON_CACHE_DIR"], True)


def run_rollout(native, model_dir, cuda_graphs=False, values="observable"):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if not native:
        env.update(PHASEALLOC_LIBRARY=vllm_bridge(), PHASEALLOC_BRIDGE="c10", PHASEALLOC_CONF="device:cuda_vmm")
    if on_simulator():
        env["PHASEALLOC_SIMCUDA_DIR"] = find_simulator()
        env["SIMCUDA_GPU"] = "quiet:1,values:" + values
    env.update(VLLM_ENV)
    command = launcher()
    if on_simulator():
        command = [command[0], "--sim-gpu=%dGiB" % (SIM_MEMORY // GIB)] + command[2:]
    if native:
        command.append("--native")
    command += ["--", vllm_python(), os.path.join(HERE, "vllm_rollout.py"), str(model_dir)]
    if cuda_graphs:
        command.append("--cuda-graphs")
    out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    lines = [l for l in out.stdout.splitlines() if l.startswith("ROLLOUT ")]
    assert out.returncode == 0 and lines, out.stdout[-3000:] + out.stderr[-8000:]
    return json.loads(lines[-1][len("ROLLOUT "):]), out.stderr


def check_rollout(r, native, cuda_graphs=False):
    from vllm_rollout import GREEDY_TOLERANCE, MAX_TOKENS, VOCAB

    assert r["allocator"] == "native" if native else r["allocator"] != "native", r["allocator"]
    if on_simulator():
        assert r["total_bytes"] == SIM_MEMORY, r
    # The KV cache is what the utilization leaves of the device once weights and the profiled
    # activations are counted: within 160 MiB of utilization * capacity for this tiny model
    # (CUDA graphs' memory is profiled too: 97 MiB less with them, on PyTorch's allocator.)
    budget = r["utilization"] * r["total_bytes"]
    assert budget - 160 * 1024 * 1024 <= r["kv_cache_bytes"] <= budget, r
    assert len(r["tokens"]) == MAX_TOKENS and len(r["tokens_after_wake1"]) == MAX_TOKENS, r
    if cuda_graphs:
        assert r["cuda_graphs"] and "NONE" not in r["cudagraph_mode"], r  # vLLM captured its graphs
    else:
        # Eager, at values:exact: every kernel of the step is computed (vLLM's custom operations by
        # their CPU forms, its Triton kernels by Triton's interpreter), so each greedy token is the
        # CPU's greedy choice for the same prefix (Hugging Face's Llama in fp32; up to near-ties that
        # bf16 may take the other way, vllm_rollout.GREEDY_TOLERANCE), before sleep and after the
        # wake-up (the weights restored from the host, the KV cache given back and taken again). A CUDA
        # graph's kernels are not computed on the simulator, so there they are whatever the memory
        # held.
        assert all(0 <= t < VOCAB for t in r["tokens"] + r["tokens_after_wake1"]), r
        if on_simulator():
            assert r["value_level"] == "exact", r
        for name in ("tokens", "tokens_after_wake1"):
            assert max(r["deficits"][name]) <= GREEDY_TOLERANCE, (name, r[name], r["deficits"][name],
                                                                  r["reference_tokens"])
        assert r["tokens_after_wake1"] == r["tokens"], r
    # Sleep gives the KV cache (and at level 1 the weights, backed up on the host) back to the
    # device: cudaMemGetInfo sees at least the KV cache come back, and wake_up takes it again.
    assert r["free_asleep1"] - r["free_before_sleep1"] >= r["kv_cache_bytes"], r
    assert r["free_awake1"] == r["free_before_sleep1"], r
    assert r["free_asleep2"] - r["free_awake1"] >= r["kv_cache_bytes"], r
    assert r["free_awake2"] == r["free_awake1"], r
    # phasealloc's phase detection sees vLLM's sleep and wake_up (generation follows a wake-up).
    if not native:
        assert (r["phase_asleep1"], r["phase_awake1"]) == ("sleep", "generation"), r
    # Level 1 restores the weights from the host copy: the same values after wake_up.
    assert r["checksum_after_wake1"] == r["checksum_before_sleep"], r


if pytest is not None and __name__ != "__main__":
    _REASON = "no GPU and no simulated GPU (build tools/simcuda)" if on_simulator() and not find_simulator() else None
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    @pytest.fixture(scope="module")
    def model_dir(tmp_path_factory):
        return tmp_path_factory.mktemp("tiny-llama")

    # Under phasealloc eager and with CUDA graphs, under PyTorch's allocator eager, each submission;
    # PyTorch's allocator with CUDA graphs in the weekly tier (tests/harness/tiers.py).
    @pytest.mark.parametrize("native,cuda_graphs", [
        pytest.param(True, False, id="native-eager"),
        pytest.param(True, True, id="native-cuda_graphs", marks=pytest.mark.weekly),
        pytest.param(False, False, id="phasealloc-eager"),
        pytest.param(False, True, id="phasealloc-cuda_graphs")])
    def test_vllm_rollout_sleep_wake(native, cuda_graphs, model_dir):
        if vllm_python() is None:
            pytest.skip("PHASEALLOC_VLLM_VENV names no vLLM venv (tools/dev.sh vllm makes one and runs this)")
        if not native and vllm_bridge() is None:
            pytest.skip("no c10 bridge built against torch %s (tools/dev.sh vllm builds it)" % VLLM_TORCH)
        report, _ = run_rollout(native, model_dir / "model", cuda_graphs,
                                values="observable" if cuda_graphs else "exact")
        check_rollout(report, native, cuda_graphs)
