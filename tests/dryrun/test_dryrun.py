"""phasealloc dryrun: an unmodified PyTorch job runs on the simulated GPU, its allocations are
recorded with the phases the env-var swap detects, and each allocator's replay at the planned
capacity says whether the job fits."""

import json
import os
import subprocess
import sys

import torch_harness

EXAMPLE = ["-m", "phasealloc.examples.rlhf_step"]
# TRL's trainers as jobs: simcuda's value-mode scenarios.
VALUE_SCENARIOS = os.path.join(torch_harness.REPO, "tools", "simcuda", "tests", "values_scenarios.py")


def dryrun(args, job, timeout=600, conf=None):
    """conf: the PHASEALLOC_CONF the job is recorded under (None: none)."""
    torch_harness.skip_or_fail()
    env = dict(os.environ, PHASEALLOC_SIMCUDA_DIR=torch_harness.find_simulator(),
               PHASEALLOC_LIBRARY=torch_harness.find_library(),
               PYTHONPATH=torch_harness.HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PHASEALLOC_CONF", None)
    if conf is not None:
        env["PHASEALLOC_CONF"] = conf
    return subprocess.run([torch_harness.find_cli(), "dryrun"] + args + ["--", sys.executable] + job, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_dryrun_replays_the_job_under_each_allocator(tmp_path):
    html = tmp_path / "report.html"
    traces = tmp_path / "traces"
    out = dryrun(["--gpu", "24GiB", "--json", "--html", str(html), "--trace-dir", str(traces)], EXAMPLE)
    assert out.returncode == 0, out.stderr[-4000:]
    doc = json.loads(out.stdout)
    assert doc["job"]["exit_status"] == 0 and doc["job"]["command"][-1] == "phasealloc.examples.rlhf_step"
    assert doc["capacity_bytes"] == 24 << 30
    assert [r["policy"] for r in doc["results"]][:2] == ["pytorch", "pytorch:expandable_segments:True"]
    assert doc["results"][2]["policy"].startswith("phasealloc")
    assert len(doc["processes"]) == 1 and doc["processes"][0]["results"] == doc["results"]
    for r in doc["results"]:
        assert r["ooms"] == 0
        assert r["peak_reserved_bytes"] >= r["peak_allocated_bytes"] >= doc["floor_bytes"] > 0
        # The phases the example marks, recorded by the swap, replayed per phase.
        assert {"generation", "inference", "training", "optimizer"} <= {p["name"] for p in r["phases"]}
    assert html.read_text().startswith("<!DOCTYPE html>")
    (trace,) = list(traces.glob("*.patrace"))
    assert trace.stat().st_size > 0
    # Beside it, the simulator's books of the process (device memory outside the allocator).
    (books,) = list(traces.glob("books.*.json"))
    assert json.loads(books.read_text())["devices"][0]["peak_nccl_bytes"] == 0
    # The progress and the job's own output go to stderr / through, not into the JSON.
    assert "phasealloc dryrun: job exited with status 0" in out.stderr


def test_a_job_recorded_with_offload_auto_replays_its_offloads_and_their_copy_time():
    """The example job (AdamW, a reference and a reward model in eval mode) under offload:auto: its
    trace carries the offload calls, phasealloc's replay makes them (bytes out and back, their time
    at --link), PyTorch's allocator has no such calls and says so."""
    out = dryrun(["-p", "pytorch", "-p", "phasealloc", "--gpu", "24GiB", "--json", "--html", "", "--link", "25GB/s"],
                 EXAMPLE, conf="offload:auto")
    assert out.returncode == 0, out.stderr[-4000:]
    pytorch, phasealloc = json.loads(out.stdout)["results"]
    assert phasealloc["offloaded_bytes"] > 0 and phasealloc["restored_bytes"] > 0, phasealloc
    assert phasealloc["offload_failures"] == 0, phasealloc
    moved = phasealloc["offloaded_bytes"] + phasealloc["restored_bytes"]
    assert abs(phasealloc["modelled_copy_seconds"] - moved / 25e9) < 1e-9, phasealloc
    assert sum(p["offloaded_bytes"] for p in phasealloc["phases"]) == phasealloc["offloaded_bytes"]
    assert pytorch["offloaded_bytes"] == 0 and pytorch["offload_failures"] > 0, pytorch
    assert "no same-address offload" in pytorch["first_offload_failure"]


def test_dryrun_says_which_allocator_runs_out_of_memory():
    # Below the job's peak of live bytes no allocator fits: every one must say so, in its phase.
    out = dryrun(["--gpu", "64MiB", "--record-gpu", "4GiB", "--html", "", "-q"], EXAMPLE)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "On a 64.00 MiB GPU:" in out.stdout
    verdicts = [l for l in out.stdout.splitlines() if "OUT OF MEMORY" in l]
    assert len(verdicts) == 3, out.stdout
    assert all(" in " in l for l in verdicts)


def test_a_failing_job_still_gets_its_report_and_its_exit_status():
    job = ["-c", "import torch; keep = torch.empty(1 << 20, device='cuda'); raise SystemExit(3)"]
    out = dryrun(["--gpu", "1GiB", "--json", "--html", "", "-q"], job)
    assert out.returncode == 3, out.stderr[-4000:]
    doc = json.loads(out.stdout)
    assert doc["job"]["exit_status"] == 3
    assert doc["floor_bytes"] >= 1 << 20
    assert "the job failed (exit status 3)" in out.stderr


def test_a_job_without_cuda_allocations_is_an_error_that_says_so():
    out = dryrun(["--gpu", "1GiB", "-q"], ["-c", "print('no gpu here')"])
    assert out.returncode == 1
    assert "made no CUDA allocation through PyTorch" in out.stderr


def test_bad_options_are_named():
    out = dryrun(["--gpu", "lots", "-q"], ["-c", "pass"])
    assert out.returncode == 1 and '--gpu: "lots" is not a byte size' in out.stderr


def test_a_job_that_crashes_late_in_its_exit_keeps_its_trace():
    # atexit handlers run last-registered first: this abort runs after phasealloc's exit hook (registered
    # at import torch) and before the library's own exit flush, as a crash of torch's threads while
    # Python finalizes would. The trace must be on disk already.
    job = ["-c", "import atexit, os; atexit.register(os.abort)\n"
                 "import torch; keep = torch.empty(3 << 20, device='cuda')"]
    out = dryrun(["--gpu", "1GiB", "--json", "--html", "", "-q"], job)
    assert out.returncode == 128 + 6, out.stderr[-4000:]  # SIGABRT
    doc = json.loads(out.stdout)
    assert doc["job"]["signaled"] and doc["floor_bytes"] >= 3 << 20


def test_the_dry_run_of_trls_grpo_job_shows_its_phases():
    """TRL's GRPOTrainer with a reference model, at the simulated GPU's default value level, with no
    option: TRL's own calls mark generation (generate()), inference (the reference model under
    no_grad), training and the optimizer step."""
    out = dryrun(["--gpu", "24GiB", "--html", "", "-q"], [VALUE_SCENARIOS, "trl_grpo_with_reference_three_steps"],
                 timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    phases = {line.split()[0] for line in out.stdout.splitlines() if line.split()[:1]
              and line.split()[0] in ("generation", "inference", "training", "optimizer")}
    assert phases == {"generation", "inference", "training", "optimizer"}, out.stdout[-3000:]
    assert "phasealloc:release:adaptive        fits" in out.stdout, out.stdout[-3000:]
