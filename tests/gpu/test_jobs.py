"""phasealloc in jobs started the way users start them: a multiprocessing spawn child, torchrun
with two ranks on gloo, a 10,000-operation random workload whose contents are checked through host
copies, released memory that faults when touched, and a Hugging Face GPT-2 RLHF loop whose detected
phases must equal explicit marks.

Every scenario runs in a fresh process through phasealloc-run (PHASEALLOC=1); see
tests/harness/torch_harness.py.
On the simulated GPU only copies are real, so contents are written and read through host copies.
"""

import json
import os
import random
import subprocess
import sys

import tiers
from torch_harness import MIB, bridges, child_env, child_main, free_port, gpu_skip_reason, launcher, on_simulator, run, scenarios

HERE = os.path.dirname(os.path.abspath(__file__))


# --- scenarios (children) ------------------------------------------------------------------------


def _spawn_child(queue):
    import torch  # the start-up hook swaps here, in the spawned interpreter

    import phasealloc

    x = torch.full((1000,), 3.0).cuda()
    queue.put({"enabled": phasealloc.is_enabled(), "backend": torch.cuda.get_allocator_backend(),
               "ours": phasealloc.stats()["allocated_bytes.all.current"], "intact": bool(torch.equal(x.cpu(), torch.full((1000,), 3.0)))})


def scenario_spawn(torch, phasealloc):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_spawn_child, args=(queue,))
    child.start()
    result = queue.get(timeout=300)
    child.join(timeout=60)
    assert child.exitcode == 0, child.exitcode
    assert result["enabled"] and result["intact"], result
    assert result["backend"] in ("phasealloc", "pluggable"), result
    assert result["ours"] >= 4000, result


def _ipc_child(queue, results):
    import torch  # noqa: F401  (the start-up hook swaps here too: receiving works under phasealloc)

    tensor = queue.get(timeout=300)  # opened from the parent's CUDA IPC handle
    results.put(tensor.cpu().tolist())
    del tensor
    results.put("done")


def scenario_ipc_export(torch, phasealloc):
    """A CUDA tensor phasealloc holds, sent to a spawned process through torch.multiprocessing
    (CUDA IPC): the bridge moves its storage to PyTorch's allocator and PyTorch exports it."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue, results = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_ipc_child, args=(queue, results))
    child.start()
    values = [float(i) for i in range(1000)]
    shared = torch.tensor(values).cuda()
    view = shared[10:20]
    ours = phasealloc.stats()["allocated_bytes.all.current"]
    queue.put(shared)
    received = results.get(timeout=300)
    assert received == values, received[:10]
    assert results.get(timeout=60) == "done"
    child.join(timeout=60)
    assert child.exitcode == 0, child.exitcode
    if os.environ.get("PHASEALLOC_BRIDGE") == "c10":
        assert phasealloc.stats()["allocated_bytes.all.current"] < ours, "the storage was not moved to torch's allocator"
    assert shared.cpu().tolist() == values and view.cpu().tolist() == values[10:20]  # same storage, same bytes


def scenario_random_ops(torch, phasealloc):
    """10,000 random operations on two streams (allocate with a known fill, free, record_stream,
    empty_cache, phase changes); every live tensor keeps its contents."""
    rng = random.Random(int(os.environ.get("PHASEALLOC_RANDOM_SEED", "12345")))
    ops = int(os.environ.get("PHASEALLOC_RANDOM_OPS", "10000"))
    streams = [torch.cuda.current_stream(), torch.cuda.Stream()]
    live = {}  # id -> (tensor, fill byte)
    next_id = 0
    phases = ("generation", "inference", "training", "optimizer")
    counts = {"alloc": 0, "free": 0, "record_stream": 0, "empty_cache": 0, "phase": 0, "check": 0}

    def check(key):
        tensor, fill = live[key]
        host = tensor.cpu()
        assert bool((host == fill).all()), "tensor %d lost its contents (fill %d, %d bytes)" % (key, fill, host.numel())
        counts["check"] += 1

    for step in range(ops):
        r = rng.random()
        if r < 0.45 or not live:
            size = rng.choice((rng.randrange(1, 4096), rng.randrange(4096, 1 * MIB), rng.randrange(1 * MIB, 24 * MIB)))
            fill = rng.randrange(256)
            with torch.cuda.stream(rng.choice(streams)):
                live[next_id] = (torch.full((size,), fill, dtype=torch.uint8).cuda(), fill)
            next_id += 1
            counts["alloc"] += 1
        elif r < 0.85:
            key = rng.choice(list(live))
            if rng.random() < 0.3:
                check(key)
            del live[key]
            counts["free"] += 1
        elif r < 0.93:
            tensor, _ = live[rng.choice(list(live))]
            other = streams[1] if rng.random() < 0.5 else streams[0]
            with torch.cuda.stream(other):
                tensor.record_stream(other)
            counts["record_stream"] += 1
        elif r < 0.96:
            torch.cuda.empty_cache()
            counts["empty_cache"] += 1
        else:
            phasealloc.set_phase(rng.choice(phases))
            counts["phase"] += 1
        if step % 1000 == 999:
            torch.cuda.synchronize()
            for key in list(live):
                check(key)
    torch.cuda.synchronize()
    for key in list(live):
        check(key)
    s = phasealloc.stats()
    assert s["allocated_bytes.all.current"] >= sum(t.numel() for t, _ in live.values())
    assert s["num_ooms"] == 0 and s["phasealloc"]["interpose_misuse"] == 0, s["phasealloc"]
    assert all(counts[k] > 0 for k in counts), counts
    print("random ops", ops, counts)


def scenario_released_memory_faults(torch, phasealloc):
    """release:all (any amount: release_threshold 2 MiB) unmaps a phase's free pages at the next phase change: the address no longer
    holds memory, and touching it kills the process with the simulator's illegal-address report
    (parent side: test_touching_released_memory_faults)."""
    import ctypes

    from simcuda.introspect import simulator

    sim = simulator()
    with phasealloc.phase("generation"):
        kv = torch.full((256 * MIB,), 1, dtype=torch.uint8).cuda()  # above reclaim_min_run (128 MiB)
        address = kv.data_ptr()
        assert sim.pointer_range(address)[1] != 0, "the simulator does not see the block as mapped"
        del kv
        mapped_before = sim.mapped(0)  # freed, still cached: the phase may reuse it
    # Leaving the phase is a transition: generation's free pages are released.
    assert sim.mapped(0) <= mapped_before - 256 * MIB, (mapped_before, sim.mapped(0))
    print("released", mapped_before - sim.mapped(0), flush=True)
    ctypes.string_at(address, 1)  # the GPU's memory, touched where nothing is mapped any more
    raise AssertionError("touching released memory did not fault")


def scenario_gpt2_phases(torch, phasealloc):
    """A small RLHF step on Hugging Face GPT-2 (random weights): rollout with generate(), scoring
    under no_grad, a policy-gradient loss, backward, optimizer step. Prints the phase books."""
    import transformers

    explicit = os.environ.get("PHASEALLOC_DETECT") == "0"
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=512, n_positions=64)
    policy = transformers.GPT2LMHeadModel(config).cuda()
    reference = transformers.GPT2LMHeadModel(config).cuda().eval()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4)
    prompt = torch.randint(0, 512, (4, 8)).cuda()

    def mark(name):  # detection's phases are sticky: the explicit twin is set_phase
        if explicit:
            phasealloc.set_phase(name)

    for _ in range(3):
        mark("generation")
        rollout = policy.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
        mark("inference")
        with torch.no_grad():
            ref_logits = reference(rollout).logits
        mark("training")
        logits = policy(rollout).logits
        loss = (logits - ref_logits).pow(2).mean()
        loss.backward()
        mark("optimizer")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        del rollout, ref_logits, logits, loss
    books = {p["name"]: {"intervals": p["intervals"], "num_allocs": p["num_allocs"], "num_frees": p["num_frees"],
                         "peak_allocated_bytes": p["peak_allocated_bytes"]}
             for p in phasealloc.stats()["phases"] if p["num_allocs"] or p["intervals"]}
    return books


SCENARIOS = scenarios(globals())


# --- pytest side ---------------------------------------------------------------------------------

try:
    import pytest
except ImportError:
    pytest = None

if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    @pytest.mark.parametrize("bridge", bridges())
    def test_a_spawned_child_swaps(bridge):
        run(__file__, "spawn", sim_gpu=None, native=False, conf="device:cuda_vmm", bridge=bridge)

    def test_cuda_ipc_export_of_our_memory():
        if "c10" not in bridges():
            pytest.skip("CUDA IPC export of phasealloc's memory needs the c10 bridge")
        run(__file__, "ipc_export", sim_gpu=None, native=False, conf="device:cuda_vmm", bridge="c10")

    @pytest.mark.parametrize("device", ("cuda_vmm", "cuda_runtime"))
    def test_random_operations_keep_contents(device):
        # Only copies touch the bytes here (filled and compared on the CPU), and simcuda's copies are
        # real at every value level: at `off` no operation pays for computing values (half the time).
        # 4,000 operations each submission, 10,000 in the weekly tier (tests/harness/tiers.py); the
        # engine's own random runs (engine_scenario_test, engine_stress_test) go to millions.
        run(__file__, "random_ops", sim_gpu=None, native=False,
            conf="device:%s,policy:[phasealloc:release:all,release_threshold:2MiB]" % device,
            env={"SIMCUDA_GPU": "quiet:1,values:off",
                 "PHASEALLOC_RANDOM_OPS": os.environ.get("PHASEALLOC_RANDOM_OPS", "10000" if tiers.weekly() else "4000")})

    def test_touching_released_memory_faults():
        if not on_simulator():
            pytest.skip("a real GPU reports the fault asynchronously and poisons the context: simulator only")
        env = child_env("device:cuda_vmm,policy:[phasealloc:release:all,release_threshold:2MiB]")
        out = subprocess.run(launcher() + ["--", sys.executable, __file__, "released_memory_faults"], env=env,
                             capture_output=True, text=True, timeout=600)
        assert "released" in out.stdout, out.stdout + out.stderr
        assert out.returncode != 0, "the process survived touching released memory"
        assert "illegal address" in out.stderr and "freed, unmapped or without access" in out.stderr, out.stderr[-3000:]

    def _phase_books(detect):
        return run(__file__, "gpt2_phases", sim_gpu=None, native=False, conf="device:cuda_vmm",
                   env={"PHASEALLOC_DETECT": "1" if detect else "0"})

    def test_detected_phases_equal_explicit_marks_on_gpt2():
        detected, explicit = _phase_books(True), _phase_books(False)
        assert {"generation", "inference", "training", "optimizer"} <= set(explicit), explicit
        assert detected == explicit

    def test_torchrun_two_ranks_on_gloo(tmp_path):
        env = child_env("device:cuda_vmm")
        out = subprocess.run(launcher() + ["--", sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                                           "--master-port", str(free_port()),
                                           os.path.join(HERE, "torchrun_rank.py"), str(tmp_path)],
                             env=env, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
        results = [json.loads((tmp_path / ("rank%d.json" % r)).read_text()) for r in range(2)]
        for rank, r in enumerate(results):
            assert r["rank"] == rank and r["world"] == 2, r
            assert r["enabled"] and r["backend"] in ("phasealloc", "pluggable"), r
            assert r["sum"] == 3.0 * 1000, r  # all_reduce of 1.0 and 2.0 over 1000 elements
            assert r["ours"] >= 4 * 1000, r


if __name__ == "__main__":
    child_main(globals(), "torch", "phasealloc")
