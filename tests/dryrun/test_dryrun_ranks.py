"""phasealloc dryrun across ranks: a torchrun job on --gpus simulated GPUs, every rank recorded and
replayed, with NCCL's buffers (device memory outside the allocator, from the simulator's books) as
their own line, the device total, and which rank runs out first."""

import json
import os
import re
import shutil
import sys
import tempfile

import pytest

from test_dryrun import dryrun
from torch_harness import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20
CHANNELS = 4  # NCCL_MAX_NCHANNELS for the jobs: NCCL's buffers scale with it


def nccl_model_bytes(channels):
    """NCCL's collective buffers per rank as the simulator models them (tools/simcuda/src/nccl/README.md):
    per channel one receive connection of SIMPLE (4 MiB) + LL (512 KiB) + LL128 (4800 KiB) buffers,
    each allocation in whole 2 MiB pages."""
    connection = 4 * MIB + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8
    return channels * (-(-connection // (2 * MIB)) * 2 * MIB)


def torchrun(world, script, *args):
    return ["-m", "torch.distributed.run", "--nproc-per-node", str(world), "--master-port", str(free_port()), script] + \
        [str(a) for a in args]


@pytest.fixture(autouse=True)
def few_channels(monkeypatch):
    monkeypatch.setenv("NCCL_MAX_NCHANNELS", str(CHANNELS))


def parse_bytes(text):
    number, unit = text.split()
    return float(number) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]


def rank_rows(stdout):
    """The per-rank table's rows: (rank, gpu, what) -> [cell per allocator]."""
    lines = stdout.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("Per rank on a "))
    rows = {}
    for line in lines[start + 3:]:
        m = re.match(r"(\d+) \(GPU (\d+)\) (.+?)\s{2,}(.*)$", line)
        if not m:
            break
        rows[(int(m.group(1)), int(m.group(2)), m.group(3))] = re.split(r"\s{2,}", m.group(4).strip())
    return rows


def test_ddp_job_per_rank_table_and_json(tmp_path):
    """A 2-rank DDP step of a tiny Llama (tests/gpu/nccl_job_rank.py): each rank's own trace, NCCL's
    line equal to the modelled buffers, and the JSON's numbers equal to the table's."""
    job = torchrun(2, os.path.join(REPO, "tests", "gpu", "nccl_job_rank.py"), "ddp", tmp_path)
    text = dryrun(["--gpu", "16GiB", "--gpus", "2", "--html", ""], job)
    assert text.returncode == 0, text.stdout[-3000:] + text.stderr[-6000:]
    rows = rank_rows(text.stdout)
    assert {k[:2] for k in rows} == {(0, 0), (1, 1)}, text.stdout  # rank r on GPU r (LOCAL_RANK)
    for rank in (0, 1):
        nccl = rows[(rank, rank, "NCCL (outside the allocator)")]
        assert len(nccl) == 3 and all(parse_bytes(c) == nccl_model_bytes(CHANNELS) for c in nccl), text.stdout
        assert any(k[0] == rank and k[2].startswith("peak reserved: ") for k in rows), text.stdout
    assert re.search(r"every rank fits; the fullest: rank [01] \(GPU [01]\)", text.stdout), text.stdout

    js = dryrun(["--gpu", "16GiB", "--gpus", "2", "--json", "--html", ""], job)
    assert js.returncode == 0, js.stderr[-6000:]
    doc = json.loads(js.stdout)["per_rank"]
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and [r["device"] for r in doc["ranks"]] == [0, 1]
    for r in doc["ranks"]:
        assert r["nccl_peak_bytes"] == nccl_model_bytes(CHANNELS)
        for res in r["results"]:
            assert res["capacity_bytes"] == (16 << 30) - r["nccl_peak_bytes"]
            assert res["device_total_bytes"] == res["peak_reserved_bytes"] + r["nccl_peak_bytes"]
            assert res["ooms"] == 0 and res["peak_reserved_bytes"] > 0
            # The same job's table says the same (rounded as the table prints it).
            for p in res["phases"]:
                cell = rows[(r["rank"], r["device"], "peak reserved: " + p["name"])]
                printed = cell[[x["policy"] for x in r["results"]].index(res["policy"])]
                assert abs(parse_bytes(printed) - p["peak_reserved_bytes"]) <= 0.01 * p["peak_reserved_bytes"] + 1024
            total = rows[(r["rank"], r["device"], "device total")][[x["policy"] for x in r["results"]].index(res["policy"])]
            assert abs(parse_bytes(total) - res["device_total_bytes"]) <= 0.01 * res["device_total_bytes"]
    assert all(f["fits"] for f in doc["runs_out_first"])


def test_the_rank_that_holds_more_runs_out_first(tmp_path):
    """Rank 1 holds 512 MiB more than rank 0: on a 512 MiB GPU rank 0 fits, rank 1 runs out, under
    every allocator; the job itself ran on a larger simulated GPU (--record-gpu)."""
    job = torchrun(2, os.path.join(HERE, "uneven_ranks_job.py"), 64, 512)
    html = tmp_path / "ranks.html"
    out = dryrun(["--gpu", "512MiB", "--record-gpu", "4GiB", "--gpus", "2", "--json", "--html", str(html)], job)
    assert out.returncode == 0, out.stderr[-6000:]
    doc = json.loads(out.stdout)["per_rank"]
    by_rank = {r["rank"]: r for r in doc["ranks"]}
    assert sorted(by_rank) == [0, 1]
    assert all(r["nccl_peak_bytes"] == nccl_model_bytes(CHANNELS) for r in doc["ranks"])
    assert all(res["ooms"] == 0 for res in by_rank[0]["results"])
    assert all(res["ooms"] > 0 for res in by_rank[1]["results"])
    assert len(doc["runs_out_first"]) == 3
    for first in doc["runs_out_first"]:
        assert first["rank"] == 1 and first["device"] == 1 and not first["fits"] and first["phases"], first
    # One page for both ranks: the totals table, and the rank selector over each rank's report
    # (radio buttons and CSS: no script), every element id unique.
    page = html.read_text()
    assert "<script" not in page
    assert '<label for="rank-select-0">rank 0 (GPU 0)</label>' in page
    assert '<label for="rank-select-1">rank 1 (GPU 1)</label>' in page
    assert page.count('class="rank-page"') == 2
    ids = re.findall(r'id="([^"]+)"', page)
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    totals = page[page.index('<section id="ranks">'):page.index("</section>", page.index('<section id="ranks">'))]
    rank1 = totals[totals.index("rank 1 (GPU 1)"):]
    assert rank1.count("out of memory") == 3 and "out of memory" not in totals[:totals.index("rank 1 (GPU 1)")]


def test_gpus_out_of_range_is_refused_before_the_job_runs(tmp_path):
    marker = tmp_path / "ran"
    out = dryrun(["--gpus", "17"], ["-c", "open(%r, 'w')" % str(marker)])
    assert out.returncode != 0 and "--gpus 17: the simulated machine has 1 to 16 GPUs" in out.stderr, out.stderr
    assert not marker.exists()


# Four ranks of FSDP2 (33 s): weekly (tests/harness/tiers.py); DDP's ranks above are the per-submission check.
@pytest.mark.weekly
def test_fsdp2_example_sharded_across_four_ranks_at_values_off(tmp_path):
    """The FSDP2 example (phasealloc.examples.fsdp2_llama, built on the meta device, each rank
    materialising its own shard) in its tiny shape on 4 GPUs at values:off, the level of dry runs
    larger than the machine: every rank runs its steps, is traced with training and optimizer
    phases, and holds the same memory (equal shards)."""
    job = ["-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-port",
           str(free_port()), "-m", "phasealloc.examples.fsdp2_llama", "--shape", "tiny",
           "--seq", "64", "--steps", "2"]
    out = dryrun(["--values", "off", "--gpu", "8GiB", "--gpus", "4", "--json", "--html", ""], job)
    assert out.returncode == 0, out.stderr[-6000:]
    for rank in range(4):
        assert "rank %d/4: tiny, 2 steps" % rank in out.stderr, out.stderr[-4000:]
    doc = json.loads(out.stdout)["per_rank"]
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3] and [r["device"] for r in doc["ranks"]] == [0, 1, 2, 3]
    peaks = set()
    for r in doc["ranks"]:
        for res in r["results"]:
            assert res["ooms"] == 0 and res["peak_reserved_bytes"] > 0, res
            assert {"training", "optimizer"} <= {p["name"] for p in res["phases"]}, res["phases"]
        peaks.add(tuple(res["peak_reserved_bytes"] for res in r["results"]))
    assert len(peaks) == 1, peaks


def test_a_ray_jobs_workers_are_named_by_rank_and_role(tmp_path, monkeypatch):
    """A Ray job (ray.init() inside the dry run) whose two GPU actors have their own PHASEALLOC_ROLE
    (tests/gpu/ray_workers_job.py): each worker's trace is its own, and the per-rank table and JSON
    name it by rank and role."""
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    if not os.path.exists(ray):
        pytest.skip("Ray is not installed (tests/requirements.txt has it)")
    temp = tempfile.mkdtemp(prefix="pa-ray-", dir="/tmp")  # Ray's socket paths must stay short
    monkeypatch.setenv("RAY_TMPDIR", temp)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    job = [os.path.join(REPO, "tests", "gpu", "ray_workers_job.py"), "local", str(tmp_path / "workers.json")]
    try:
        out = dryrun(["--gpu", "8GiB", "--gpus", "2", "--json", "--html", ""], job)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    doc = json.loads(out.stdout)
    ranks = doc["per_rank"]["ranks"]
    assert sorted(r["role"] for r in ranks) == ["rollout", "trainer"], ranks
    workers = json.loads((tmp_path / "workers.json").read_text())["workers"]
    assert sorted(r["pid"] for r in ranks) == sorted(w["pid"] for w in workers)
    for r in ranks:
        assert r["trace"] == "rank0.role%s.pid%d.patrace" % (r["role"], r["pid"]), r
        assert all(res["ooms"] == 0 and res["peak_reserved_bytes"] >= 4 * MIB for res in r["results"]), r


# A second Ray job (the roles' test above is the per-submission one): weekly (tests/harness/tiers.py).
@pytest.mark.weekly
def test_ray_actors_without_a_role_take_their_actor_name_and_their_pid_tells_them_apart(tmp_path, monkeypatch):
    """The same job with no PHASEALLOC_ROLE on either actor (as frameworks run): each trace takes the role
    Ray's process title gives (the actor class, GpuWorker), and the two workers, both rank 0 with one
    role, are told apart by their pids in the per-rank table."""
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    if not os.path.exists(ray):
        pytest.skip("Ray is not installed (tests/requirements.txt has it)")
    temp = tempfile.mkdtemp(prefix="pa-ray-", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", temp)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    job = [os.path.join(REPO, "tests", "gpu", "ray_workers_job.py"), "local", str(tmp_path / "workers.json"), "-", "-"]
    try:
        out = dryrun(["--gpu", "8GiB", "--gpus", "2", "--html", "", "--trace-dir", str(tmp_path / "traces")], job)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    pids = sorted(w["pid"] for w in json.loads((tmp_path / "workers.json").read_text())["workers"])
    traces = sorted(n for n in os.listdir(tmp_path / "traces") if n.endswith(".patrace"))
    assert traces == ["rank0.roleGpuWorker.pid%d.patrace" % p for p in pids]
    for pid in pids:
        assert re.search(r"^0 GpuWorker pid %d \(GPU 0\) device total " % pid, out.stdout, re.M), out.stdout[-3000:]
