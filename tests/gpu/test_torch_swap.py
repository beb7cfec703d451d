"""phasealloc as PyTorch's CUDA allocator, end to end on a real GPU.

Run (from the repository root, after building libphasealloc_torch.so):

    PHASEALLOC_LIBRARY=build/interpose/libphasealloc_torch.so python -m pytest tests/gpu -v

PHASEALLOC_LIBRARY may be left out when a build*/interpose/libphasealloc_torch.so exists. Skips with
the reason when torch, CUDA or the library is missing.

Every scenario runs in a fresh process started through phasealloc-run (PHASEALLOC=1: the swap
happens at `import torch`, the drop-in path users take): the test file runs itself as
`python test_torch_swap.py <scenario>`; a scenario asserts inside the child, which prints its
RESULT line when it returns (tests/harness/torch_harness.py). Scenarios run on device:cuda_vmm and device:cuda_runtime.
"""

import os
import subprocess
import sys

from torch_harness import (DEVICES, MIB, bridges, child_env, child_main, find_library, gpu_skip_reason, launcher,
                           run, scenarios)

# --- scenarios (run in the child, with phasealloc already enabled by the start-up hook) ----------
#
# Contents are written and read through host copies (`host.cuda()`, `.cpu()`), never through
# kernels: copies are real on the simulated GPU as on a real one, kernel results are not.


def on_device(torch, host):
    """`host` copied to the GPU: a real write on a real or a simulated GPU."""
    return host.to("cuda")

def c10_bridge():
    """Whether this child runs with the c10 bridge (else through CUDAPluggableAllocator)."""
    return os.environ.get("PHASEALLOC_BRIDGE") == "c10"


def scenario_stats_before_cuda_init(torch, phasealloc):
    """The memory API's readers answer as PyTorch 2.15's do before CUDA initialises ({} and zeros)
    and, like them, do not initialise CUDA (checked against torch on its own allocator:
    reset_peak_memory_stats and memory_summary do initialise it there, so they are not called)."""
    assert not torch.cuda.is_initialized()
    assert dict(torch.cuda.memory_stats()) == {} and torch.cuda.memory_stats_as_nested_dict() == {}
    assert torch.cuda.memory_allocated() == 0 and torch.cuda.max_memory_reserved() == 0
    assert torch.cuda.memory_snapshot() == []
    if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "memory_stats"):
        assert dict(torch.accelerator.memory_stats()) == {}
    assert not torch.cuda.is_initialized(), "a stats call initialised CUDA"
    x = on_device(torch, torch.ones(10))
    assert torch.cuda.memory_allocated() >= 40


def scenario_swap(torch, phasealloc):
    assert phasealloc.is_enabled(), "the PHASEALLOC=1 start-up hook did not enable phasealloc"
    x = on_device(torch, torch.ones(1024))  # CUDA lazy init happens after the swap
    backend = torch.cuda.get_allocator_backend() if hasattr(torch.cuda, "get_allocator_backend") else "?"
    assert backend in (("phasealloc",) if c10_bridge() else ("pluggable", "?")), backend
    s = phasealloc.stats()
    assert s["allocated_bytes.all.current"] >= 4096, s["allocated_bytes.all.current"]
    assert s["phasealloc"]["device"] in ("cuda_vmm", "cuda_runtime"), s["phasealloc"]
    assert torch.equal(x.cpu(), torch.ones(1024))
    print("device", s["phasealloc"]["device"], "policy", s["phasealloc"]["policy"])


def scenario_phases_and_streams(torch, phasealloc):
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    sizes = [1, 1000, 300 * 1024, 5 * MIB // 4, 100 * MIB // 4]  # float32 elements: 4 B .. 100 MiB
    kept = {}
    with phasealloc.phase("generation"):
        for i, n in enumerate(sizes):
            with torch.cuda.stream(s1 if i % 2 else s2):
                kept[("gen", i)] = on_device(torch, torch.full((n,), float(i + 1)))
                transient = torch.empty(n * 2, device="cuda")  # freed at once: its block is reused
                del transient
    with phasealloc.phase("training"):
        for i, n in enumerate(sizes):
            kept[("train", i)] = on_device(torch, torch.arange(n, dtype=torch.float32))
        for i in range(1, len(sizes), 2):  # free some generation tensors in the training phase
            del kept[("gen", i)]
    torch.cuda.synchronize()
    for (kind, i), t in kept.items():
        expected = torch.full((sizes[i],), float(i + 1)) if kind == "gen" else torch.arange(sizes[i], dtype=torch.float32)
        assert torch.equal(t.cpu(), expected), (kind, i)

    # record_stream: a block used on another stream is not reused until that stream's work is done.
    n = 64 * MIB // 4
    src = on_device(torch, torch.full((n,), 7.0))  # allocated on the default stream
    out = torch.empty(n, device="cuda")
    with torch.cuda.stream(s2):
        torch.cuda._sleep(200_000_000)  # keep s2 busy for a while
        out.copy_(src)
    src.record_stream(s2)
    del src
    clobber = on_device(torch, torch.full((n,), -1.0))  # must not land on src's block before s2 read it
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.full((n,), 7.0)), "a block was reused while s2 still read it"
    del clobber

    phases = {p["name"]: p for p in phasealloc.stats()["phases"]}
    assert phases["generation"]["num_allocs"] >= 2 * len(sizes)
    assert phases["training"]["num_allocs"] >= len(sizes)
    assert phases["generation"]["peak_allocated_bytes"] > 0


def scenario_memory_api(torch, phasealloc):
    tensors = [torch.empty(n, device="cuda", dtype=torch.uint8) for n in (512, 3 * MIB, 50 * MIB)]
    torch.cuda.synchronize()
    s = phasealloc.stats()
    assert torch.cuda.memory_allocated() == s["allocated_bytes.all.current"]
    assert torch.cuda.memory_reserved() == s["reserved_bytes.all.current"]
    assert torch.cuda.max_memory_allocated() == s["allocated_bytes.all.peak"]
    assert torch.cuda.max_memory_reserved() == s["reserved_bytes.all.peak"]
    stats = torch.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == s["allocated_bytes.all.current"]
    assert stats["allocation.all.current"] == s["allocation.all.current"] >= 3
    assert torch.cuda.memory_stats_as_nested_dict()["reserved_bytes"]["all"]["current"] == \
        s["reserved_bytes.all.current"]
    summary = torch.cuda.memory_summary()
    assert "phasealloc, device 0" in summary
    segments = torch.cuda.memory_snapshot()
    assert segments and all(seg["device"] == 0 for seg in segments)
    assert sum(seg["allocated_size"] for seg in segments) == s["allocated_bytes.all.current"]
    torch.cuda.memory._record_memory_history(max_entries=1000)  # warns, does not raise
    path = "/tmp/phasealloc_gpu_snapshot_%d.pickle" % os.getpid()
    torch.cuda.memory._dump_snapshot(path)
    import pickle

    with open(path, "rb") as f:
        assert pickle.load(f)["segments"]
    os.remove(path)
    if c10_bridge():
        # torch's own entry points read phasealloc's books, history included.
        assert torch.accelerator.memory_allocated() == s["allocated_bytes.all.current"]
        assert torch.cuda.get_per_process_memory_fraction() == 1.0
        more = torch.empty(7 * MIB, device="cuda", dtype=torch.uint8)
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        entries = snap["device_traces"][0]
        allocs = [e for e in entries if e["action"] == "alloc" and e["addr"] == more.data_ptr()]
        assert allocs and allocs[-1]["size"] == 7 * MIB and allocs[-1]["frames"], allocs
        assert any(f["filename"].endswith("test_torch_swap.py") for f in allocs[-1]["frames"]), allocs[-1]["frames"]
        blocks = [b for seg in snap["segments"] for b in seg["blocks"] if b["address"] == more.data_ptr()]
        assert len(blocks) == 1 and blocks[0]["state"] == "active_allocated" and blocks[0]["frames"], blocks
        del more
        assert [e["action"] for e in torch.cuda.memory._snapshot()["device_traces"][0][-2:]] == \
            ["free_requested", "free_completed"]
        from torch.cuda import _memory_viz

        text = _memory_viz.segsum(snap)  # memory_viz reads our snapshot and reports our books
        assert "total_reserved: %s" % _memory_viz.Bytes(torch.cuda.memory_reserved()) in text, text
        assert "total_allocated: %s" % _memory_viz.Bytes(s["allocated_bytes.all.current"] + 7 * MIB) in text, text
        assert "<html" in _memory_viz.trace_plot(snap).lower()
        torch.cuda.set_per_process_memory_fraction(0.5)
        assert abs(torch.cuda.get_per_process_memory_fraction() - 0.5) < 1e-6
        torch.cuda.memory._record_memory_history(enabled=None)
    del tensors
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()


def scenario_empty_cache(torch, phasealloc):
    free_before, total = torch.cuda.mem_get_info()
    tensors = [torch.empty(64 * MIB, device="cuda", dtype=torch.uint8) for _ in range(8)]
    torch.cuda.synchronize()
    assert torch.cuda.memory_reserved() >= 8 * 64 * MIB
    del tensors
    assert torch.cuda.memory_allocated() == 0
    assert torch.cuda.memory_reserved() >= 8 * 64 * MIB  # cached
    torch.cuda.empty_cache()  # the reset hook: every engine gives its cache back
    assert torch.cuda.memory_reserved() == 0
    free_after, _ = torch.cuda.mem_get_info()
    assert free_after >= free_before - 64 * MIB, (free_before, free_after)


def scenario_oom(torch, phasealloc):
    total = torch.cuda.mem_get_info()[1]
    torch.cuda.set_per_process_memory_fraction(0.05)  # the memory-fraction hook
    keep = torch.empty(int(total * 0.02), device="cuda", dtype=torch.uint8)
    oom_type = getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
    with phasealloc.phase("rollout"):
        try:
            torch.empty(int(total * 0.2), device="cuda", dtype=torch.uint8)
        except oom_type as e:
            message = str(e)
            kind = "OutOfMemoryError"
        except RuntimeError as e:
            message = str(e)
            kind = "RuntimeError"
        else:
            raise AssertionError("no out-of-memory error")
    assert "CUDA out of memory." in message and "phasealloc: out of memory" in message, message
    assert "phase 'rollout'" in message and "Per phase" in message, message
    library = phasealloc.library_path()
    companion = os.path.join(os.path.dirname(library), "libphasealloc_torch_oom.so")
    if os.path.exists(companion) or c10_bridge():
        assert kind == "OutOfMemoryError", "the companion library or the bridge exists but a RuntimeError was raised"
    print("oom raised", kind, "(companion %s)" % ("present" if os.path.exists(companion) else "absent"))
    assert phasealloc.stats()["num_ooms"] == 1
    small = on_device(torch, torch.ones(1000))  # the process goes on
    assert torch.equal(small.cpu(), torch.ones(1000))
    del keep


def scenario_training_detection(torch, phasealloc):
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        with torch.no_grad():
            model(torch.randn(64, 1024, device="cuda"))
        loss = model(torch.randn(64, 1024, device="cuda")).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    names = {p["name"]: p for p in phasealloc.stats()["phases"]}
    for name in ("inference", "training", "optimizer"):
        assert name in names and names[name]["intervals"] >= 3, (name, sorted(names))
    assert names["optimizer"]["num_allocs"] > 0  # AdamW state is allocated in the step


def scenario_graphs_and_pools(torch, phasealloc):
    """MemPool, use_mem_pool and CUDA graph capture: served by PyTorch's native allocator through
    the c10 bridge; refused with a message naming the way out through CUDAPluggableAllocator."""
    n = 1 << 20
    if not c10_bridge():
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g):
                torch.ones(10, device="cuda")
        except RuntimeError as e:
            assert "CUDA graph capture is not supported" in str(e), str(e)
        else:
            raise AssertionError("graph capture did not raise")
        return
    ours_before = phasealloc.stats()["allocated_bytes.all.current"]
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        pooled = on_device(torch, torch.full((n,), 3.0))  # 4 MiB in the native allocator's pool
    assert phasealloc.stats()["allocated_bytes.all.current"] == ours_before, "a pool allocation reached phasealloc"
    assert torch.cuda.memory_allocated() >= ours_before + 4 * n, "torch's books miss the pool's block"
    segments = pool.snapshot()
    assert sum(s["allocated_size"] for s in segments) >= 4 * n, segments
    assert all(tuple(s["segment_pool_id"]) == tuple(pool.id) for s in segments), segments
    outside = on_device(torch, torch.full((n,), 5.0))  # after the block: phasealloc again
    assert phasealloc.stats()["allocated_bytes.all.current"] >= ours_before + 4 * n
    assert torch.equal(pooled.cpu(), torch.full((n,), 3.0)) and torch.equal(outside.cpu(), torch.full((n,), 5.0))
    del pooled, pool

    # A graph: its static tensors live in the graph's private pool; replays redo the captured copy.
    static_in = on_device(torch, torch.zeros(n))
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        static_out = torch.empty(n, device="cuda")  # captured: allocated in the graph's pool
        static_out.copy_(static_in)
    assert phasealloc.stats()["allocated_bytes.all.current"] >= ours_before + 4 * n
    for value in (1.0, 2.0):
        static_in.copy_(torch.full((n,), value))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out.cpu(), torch.full((n,), value)), value
    del static_out
    g.reset()


SCENARIOS = scenarios(globals())


# --- pytest side ---------------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # the child does not need pytest
    pytest = None

if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    @pytest.mark.parametrize("bridge", bridges())
    @pytest.mark.parametrize("device", DEVICES)
    @pytest.mark.parametrize("scenario", sorted(SCENARIOS))
    def test_torch_swap(scenario, device, bridge):
        run(__file__, scenario, sim_gpu=None, native=False, conf="device:%s" % device, bridge=bridge)

    def test_a_missing_bridge_falls_back_and_says_why():
        env = child_env("", bridge="auto")
        env.pop("PHASEALLOC_CONF")
        env["PHASEALLOC_C10_LIBRARY"] = "/nonexistent/libphasealloc_c10.so"
        code = "import torch; torch.ones(1, device='cuda'); print(torch.cuda.get_allocator_backend())"
        out = subprocess.run(launcher() + ["--", sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "pluggable", out.stdout
        said = [l for l in out.stderr.splitlines() if "c10 bridge unavailable" in l]
        assert len(said) == 1 and "/nonexistent/libphasealloc_c10.so not found" in said[0], out.stderr
        assert "MemPool, CUDA graph capture and CUDA IPC export are refused" in said[0], said[0]  # the consequence
        assert "pip install --force-reinstall --no-deps" in said[0], said[0]  # and the fix
        env["PHASEALLOC_BRIDGE"] = "c10"  # asked for the bridge: not enabled, and it says why
        out = subprocess.run(launcher() + ["--", sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.stdout.strip() == "native", out.stdout + out.stderr
        assert "PHASEALLOC_BRIDGE=c10 but the c10 bridge is unavailable" in out.stderr, out.stderr

    def test_a_child_process_inherits_the_swap():
        env = child_env("")
        env.pop("PHASEALLOC_CONF")
        code = ("import subprocess, sys\n"
                "out = subprocess.run([sys.executable, '-c', 'import torch, phasealloc; "
                "torch.ones(1, device=\"cuda\"); print(phasealloc.is_enabled())'], capture_output=True, text=True)\n"
                "print(out.stdout.strip())\n")
        out = subprocess.run(launcher() + ["--", sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().endswith("True"), out.stdout + out.stderr


if __name__ == "__main__":
    child_main(globals(), "torch", "phasealloc")
