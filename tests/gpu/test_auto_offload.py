"""offload:auto (python/phasealloc/_auto_offload.py) on an unmodified PPO-shaped loop: a GPT-2 policy
trained with AdamW, a frozen reference model, generate() for rollouts. Under the c10 bridge and
device:cuda_vmm, at simcuda's values:exact: the losses and parameters are the CPU's (the same loop
run on the CPU in the same process), with offload on as with it off, while the optimizer's state and
the reference model leave the GPU in the phases that do not use them. offload:pressure moves nothing
with memory to spare, and runs the same loop on a simulated GPU too small for it without offload
(PyTorch's allocator, with and without expandable segments, runs out of memory there).
"""

import functools

from torch_harness import child_main, gpu_skip_reason, run, scenarios

STEPS = 4


def _ppo_loop(torch, transformers, device, phase):
    """STEPS steps; returns the losses and the policy's parameters (on the CPU). `phase(name)`: a
    context manager marking the loop's phases (a no-op where detection finds them)."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=4, n_embd=512, vocab_size=256, n_positions=64,
                                     attn_implementation="eager")
    policy = transformers.GPT2LMHeadModel(config).to(device)
    reference = transformers.GPT2LMHeadModel(config).to(device).eval()
    reference.load_state_dict(policy.state_dict())
    reference.requires_grad_(False)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    prompt = torch.randint(0, 256, (2, 8), generator=torch.Generator().manual_seed(1)).to(device)
    losses, resident = [], []
    for _ in range(STEPS):
        with torch.no_grad(), phase("generation"):
            rollout = policy.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
            if device == "cuda":  # the device memory held while generating (offloaded pages are the host's)
                import phasealloc

                s = phasealloc.stats()
                resident.append((s["reserved_bytes.all.current"], s["offloaded_bytes.all.current"],
                                 s["allocated_bytes.all.current"]))
        with torch.no_grad(), phase("inference"):
            ref_logp = torch.log_softmax(reference(rollout).logits, -1)
        with phase("training"):
            logp = torch.log_softmax(policy(rollout).logits, -1)
            loss = (logp.exp() * (logp - ref_logp)).sum(-1).mean() - logp.mean()
            loss.backward()
        with phase("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss))
    state = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t))
    frozen = sum(p.numel() * p.element_size() for p in reference.parameters())
    return losses, [p.detach().cpu() for p in policy.parameters()], resident, {"state": state, "frozen": frozen}


def scenario_ppo_loop(torch, phasealloc):
    import transformers

    assert phasealloc.is_enabled(), "phasealloc is not this process's allocator"
    assert torch.cuda.get_allocator_backend() == "phasealloc", torch.cuda.get_allocator_backend()  # the c10 bridge

    from phasealloc import _auto_offload

    import contextlib
    import os

    explicit = os.environ.get("PHASEALLOC_DETECT") == "0"  # the loop marks its phases itself
    phase = phasealloc.phase if explicit else (lambda name: contextlib.nullcontext())
    losses, params, resident, idle = _ppo_loop(torch, transformers, "cuda", phase)
    schedule = _auto_offload.summary() if _auto_offload._handles else None  # before the CPU run's phases
    cpu_losses, cpu_params, _, _ = _ppo_loop(torch, transformers, "cpu", phase)
    assert all(abs(a - b) < 1e-4 * max(1.0, abs(b)) for a, b in zip(losses, cpu_losses)), (losses, cpu_losses)
    worst = max(float((a - b).abs().max()) for a, b in zip(params, cpu_params))
    assert worst < 1e-4, "the policy's parameters differ from the CPU's by %g" % worst
    s = phasealloc.stats()
    peaks = {p["name"]: p["peak_reserved_bytes"] for p in s["phases"] if p["intervals"]}
    return {"losses": losses, "peaks": peaks, "resident": resident, "idle_bytes": idle["state"] + idle["frozen"],
            "state_bytes": idle["state"], "frozen_bytes": idle["frozen"], "offloads": s["num_offloads"],
            "restores": s["num_restores"],
            "offloaded_peak": s["offloaded_bytes.all.peak"], "schedule": schedule,
            "peak_reserved": s["reserved_bytes.all.peak"], "capacity": torch.cuda.mem_get_info()[1]}


def scenario_ppo_loop_native(torch, phasealloc):
    """The same loop under PyTorch's allocator (PYTORCH_CUDA_ALLOC_CONF as the test sets it): its
    losses, or the out-of-memory error it stopped on."""
    import contextlib

    import transformers

    assert torch.cuda.get_allocator_backend() == "native" and not phasealloc.is_enabled(), "not PyTorch's allocator"
    try:
        losses = _ppo_loop(torch, transformers, "cuda", lambda name: contextlib.nullcontext())[0]
    except torch.OutOfMemoryError as exc:
        return {"oom": True, "message": str(exc).splitlines()[0], "capacity": torch.cuda.mem_get_info()[1]}
    return {"oom": False, "losses": losses, "peak_reserved": torch.cuda.max_memory_reserved()}


def scenario_a_tag_is_a_class(torch, phasealloc):
    """A buffer no hook can see, allocated and used inside `with phasealloc.tag("cache"):` in the
    "generation" phase only: it is on the host while "scoring" runs and back for "generation";
    every value is the CPU's."""
    from phasealloc import _auto_offload

    def loop(device):
        g = torch.Generator().manual_seed(5)
        weights = torch.randn(512, 512, generator=g).to(device)
        cache, sums, offloaded = None, [], []
        for step in range(3):
            with phasealloc.phase("generation"), phasealloc.tag("cache"):
                if cache is None:
                    cache = torch.randn(2048, 1024, generator=g).to(device)  # 8 MiB
                cache.mul_(0.5).add_(step)
                sums.append(float(cache.sum()))
            with phasealloc.phase("scoring"):
                sums.append(float((weights @ weights).sum()))
                if device == "cuda":
                    offloaded.append(phasealloc.stats()["offloaded_bytes.all.current"])
        return sums, cache.cpu(), offloaded

    sums, cache, offloaded = loop("cuda")
    schedule = _auto_offload.summary()
    cpu_sums, cpu_cache, _ = loop("cpu")
    assert all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(sums, cpu_sums)), (sums, cpu_sums)
    assert torch.equal(cache, cpu_cache), "the tagged buffer differs from the CPU's"
    assert "tag:cache" in schedule["classes"], schedule
    assert schedule["touched"]["generation"] == ["tag:cache"] and schedule["touched"]["scoring"] == [], schedule
    return {"offloaded": offloaded, "counts": schedule["counts"]}


SCENARIOS = scenarios(globals())

try:
    import pytest
except ImportError:
    pytest = None

if pytest is not None and __name__ != "__main__":
    _REASON = gpu_skip_reason()
    pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]

    EXACT = {"SIMCUDA_GPU": "quiet:1,values:exact"}

    @functools.lru_cache(maxsize=None)  # a run the tests share (offload:none on 16 GiB) runs once
    def _run(mode, detect, sim_gpu="16GiB", expect_ok=True):
        return run(__file__, "ppo_loop", sim_gpu=sim_gpu, native=False, conf="device:cuda_vmm,offload:%s" % mode,
                   bridge="c10", env=dict(EXACT, PHASEALLOC_DETECT="1" if detect else "0"), expect_ok=expect_ok)

    def _run_native(sim_gpu, alloc_conf=None):
        env = dict(EXACT, PYTORCH_CUDA_ALLOC_CONF=alloc_conf) if alloc_conf else EXACT
        return run(__file__, "ppo_loop_native", sim_gpu=sim_gpu, native=True, env=env)

    @pytest.fixture(scope="module")
    def ample():
        """The loop without offload and with offload:pressure on a 16 GiB simulated GPU."""
        return {"none": _run("none", True), "pressure": _run("pressure", True)}

    def test_offload_pressure_moves_nothing_with_memory_to_spare(ample):
        none, pressure = ample["none"], ample["pressure"]
        assert pressure["losses"] == none["losses"], (pressure["losses"], none["losses"])  # both the CPU's
        counts = pressure["schedule"]["counts"]
        assert pressure["schedule"]["mode"] == "pressure" and counts["pressure_calls"] == 0, pressure["schedule"]
        assert pressure["offloads"] == 0 and pressure["offloaded_peak"] == 0, pressure
        # It learned the same classes as offload:auto, ready for when memory runs out.
        assert sorted(n.split(":")[0] for n in pressure["schedule"]["classes"]) == ["frozen", "optimizer", "trained"], \
            pressure

    def test_offload_pressure_runs_a_job_that_runs_out_of_memory_without_it(ample):
        """A simulated GPU smaller than the loop's peak by half its idle state (AdamW's moments and the
        reference model): PyTorch's allocator, with and without expandable segments, and phasealloc
        without offload run out of memory; with offload:pressure the loop runs, idle state leaves when
        an allocation would fail, and the losses and parameters are still the CPU's."""
        none = ample["none"]
        capacity_mib = (none["peak_reserved"] - none["idle_bytes"] // 2) >> 21 << 1  # whole 2 MiB pages
        small = "%dMiB" % capacity_mib
        for alloc_conf in (None, "expandable_segments:True"):
            native = _run_native(small, alloc_conf)
            assert native["oom"], ("PyTorch's allocator (%s) fits in %s: the premise fails" % (alloc_conf, small), native)
        without = _run("none", True, small, expect_ok=False)
        assert without.returncode != 0 and "CUDA out of memory" in without.stderr, without.stderr[-3000:]
        pressure = _run("pressure", True, small)
        assert pressure["capacity"] == capacity_mib << 20, pressure
        assert pressure["peak_reserved"] <= pressure["capacity"] < none["peak_reserved"], pressure
        counts = pressure["schedule"]["counts"]
        assert counts["pressure_relieved"] > 0 and pressure["offloads"] > 0, pressure["schedule"]
        assert len(pressure["losses"]) == STEPS, pressure  # and the scenario compared them with the CPU's
        print("%s simulated GPU: without offload the loop needs %d bytes; offload:pressure %s" % (
            small, none["peak_reserved"], counts))

    def test_offload_auto_moves_a_tags_blocks_with_its_phases():
        r = run(__file__, "a_tag_is_a_class", sim_gpu="16GiB", native=False, conf="device:cuda_vmm,offload:auto",
                bridge="c10", env=dict(EXACT, PHASEALLOC_DETECT="0"))
        # scoring runs with the cache (8 MiB) on the host each step (it leaves when the generation
        # phase ends: the phase outside both, seen since the start, never used it), and comes back
        # for each generation after the first
        assert all(o >= 8 * 1024 * 1024 for o in r["offloaded"]), r
        assert r["counts"]["offloads"] >= 3 and r["counts"]["restores"] >= 2, r

    def test_offload_auto_stays_off_where_offload_unmaps():
        """On a driver that offloads by unmapping (simcuda's host_vmm:0) a wrong guess would be an
        illegal address: offload:auto stops at its first offload, saying why, moves nothing, and the
        loop's values are still the CPU's."""
        r = run(__file__, "ppo_loop", sim_gpu="16GiB", native=False, conf="device:cuda_vmm,offload:auto",
                bridge="c10", env={"SIMCUDA_GPU": "quiet:1,values:exact,host_vmm:0", "PHASEALLOC_DETECT": "1"})
        schedule = r["schedule"]
        assert schedule["disabled"] and "cannot map host memory" in schedule["disabled"], schedule
        assert r["offloads"] == 0 and r["offloaded_peak"] == 0, r
        assert len(r["losses"]) == STEPS, r  # and the scenario compared them with the CPU's

    @pytest.mark.parametrize("detect", (True, False), ids=("detected_phases", "explicit_phases"))
    def test_offload_auto_moves_idle_state_and_changes_no_value(detect):
        auto, none = _run("auto", detect), _run("none", detect)
        assert auto["losses"] == none["losses"], (auto["losses"], none["losses"])  # both also equal the CPU's
        assert none["offloads"] == 0 and none["schedule"] is None, none
        schedule = auto["schedule"]
        assert schedule["disabled"] is None, schedule
        kinds = sorted(name.split(":")[0] for name in schedule["classes"])
        assert kinds == ["frozen", "optimizer", "trained"], schedule  # the reference, AdamW's state, the policy
        optimizer_class = [n for n in schedule["classes"] if n.startswith("optimizer")][0]
        assert [p for p, keys in schedule["touched"].items() if optimizer_class in keys] == ["optimizer"], schedule
        # The policy's weights and gradients: used to generate, train and step, idle while the reference scores.
        trained_class = [n for n in schedule["classes"] if n.startswith("trained")][0]
        assert sorted(p for p, keys in schedule["touched"].items() if trained_class in keys) == [
            "generation", "optimizer", "training"], schedule
        assert auto["offloads"] > 0 and auto["restores"] > 0 and auto["offloaded_peak"] > 0, auto
        # Once learned (after the first step), generation holds neither the optimizer's state nor the
        # reference model: most of their bytes are the host's (all but pages shared with blocks that
        # stay), and the device holds less than without offload.
        (first_auto, first_none), later = (auto["resident"][0], none["resident"][0]), auto["resident"][1:]
        assert first_auto[1] == 0 and first_auto[0] == first_none[0], (first_auto, first_none)  # step 1 learns
        assert all(offloaded >= 0.8 * auto["idle_bytes"] for _, offloaded, _ in later), (later, auto["idle_bytes"])
        assert all(a[0] < n[0] for a, n in zip(later, none["resident"][1:])), (auto["resident"], none["resident"])
        # Every step, the first (which makes the state) included, holds a chunk of the optimizer's
        # state at a time and no reference model: in the first step, before the schedule is learned,
        # a phase never seen before sends the frozen model away on speculation (its forward would
        # bring it back). (A phase's peak spans all its intervals, the first step's included.)
        assert schedule["counts"]["chunked_steps"] == STEPS, schedule["counts"]
        saved = none["peaks"]["optimizer"] - auto["peaks"]["optimizer"]
        expected = 0.5 * auto["state_bytes"] + 0.8 * auto["frozen_bytes"]
        assert saved >= expected, (saved, expected, auto["peaks"], none["peaks"], auto["state_bytes"],
                                   auto["frozen_bytes"])
        print("while generating (reserved, offloaded, allocated): auto %s, none %s; idle state %d bytes" % (
            auto["resident"], none["resident"], auto["idle_bytes"]))


if __name__ == "__main__":
    child_main(globals(), "torch", "phasealloc")
