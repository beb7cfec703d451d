"""phasealloc dryrun --world-size N: a few ranks of an N-rank job, each run alone with the simulated
NCCL answering for its absent peers (tools/cli/virtual_ranks.hpp). The proof is the full run: where it
fits on this machine, the virtual ranks' per-rank peaks (every allocator, every phase) and NCCL's
buffers equal the full run's byte for byte."""

import json
import os

import pytest

from test_dryrun import dryrun
from test_dryrun_ranks import CHANNELS, few_channels, nccl_model_bytes  # noqa: F401 (few_channels: a fixture)
from torch_harness import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
FSDP2 = ["-m", "phasealloc.examples.fsdp2_llama", "--shape", "tiny", "--seq", "64", "--steps", "2"]


def peaks(doc):
    """rank -> (NCCL's bytes, {policy: (peak reserved, {phase: peak reserved})}) of a dry run's JSON."""
    out = {}
    for r in doc["per_rank"]["ranks"]:
        out[r["rank"]] = (r["nccl_peak_bytes"], {
            res["policy"]: (res["peak_reserved_bytes"], {p["name"]: p["peak_reserved_bytes"] for p in res["phases"]})
            for res in r["results"]})
    return out


def full_and_virtual(world, tmp_path):
    full = dryrun(["--values", "off", "--gpu", "8GiB", "--gpus", str(world), "--json", "--html", ""],
                  ["-m", "torch.distributed.run", "--nproc-per-node", str(world), "--master-port", str(free_port())]
                  + FSDP2)
    assert full.returncode == 0, full.stderr[-6000:]
    virtual = dryrun(["--values", "off", "--gpu", "8GiB", "--world-size", str(world),
                      "--ranks", ",".join(str(r) for r in range(world)), "--json", "--html", str(tmp_path / "v.html")],
                     FSDP2)
    assert virtual.returncode == 0, virtual.stderr[-6000:]
    return json.loads(full.stdout), json.loads(virtual.stdout), virtual.stderr


def check_equal(world, tmp_path):
    full, virtual, log = full_and_virtual(world, tmp_path)
    assert virtual["virtual_ranks"] == {
        "world_size": world, "gpus_per_node": world, "ran": list(range(world)),
        "stand_in": "a collective answers as if every absent rank held the running rank's values"}
    assert full["virtual_ranks"] is None
    # How each answer was obtained, from each process's own books.
    assert [(p["values"], p["virtual_peers"]) for p in full["processes"]] == [("off", False)] * world
    assert [(p["values"], p["virtual_peers"]) for p in virtual["processes"]] == [("off", True)] * world
    for rank in range(world):
        assert "rank %d/%d: tiny, 2 steps" % (rank, world) in log, log[-4000:]
        assert "rank %d of %d (virtual peers) exited with status 0" % (rank, world) in log, log[-4000:]
    got, want = peaks(virtual), peaks(full)
    assert sorted(got) == list(range(world)) and got == want, (got, want)
    assert all(nccl == nccl_model_bytes(CHANNELS) for nccl, _ in got.values())
    assert "--world-size %d" % world in (tmp_path / "v.html").read_text()


def test_two_virtual_ranks_of_fsdp2_equal_the_full_run(tmp_path):
    check_equal(2, tmp_path)


# Four ranks run whole take 33 s: weekly (tests/harness/tiers.py); two ranks above are the per-submission check.
@pytest.mark.weekly
def test_four_virtual_ranks_of_fsdp2_equal_the_full_run(tmp_path):
    check_equal(4, tmp_path)


def test_virtual_ranks_of_a_device_mesh_equal_the_full_run():
    """A 2x2 mesh made by splitting the default group's communicator (tests/dryrun/mesh_job.py): with
    virtual peers the groups are made without a split, and every rank's peaks and NCCL's buffers (three
    communicators) equal the full run's."""
    job = [os.path.join(HERE, "mesh_job.py")]
    full = dryrun(["--gpu", "8GiB", "--gpus", "4", "--json", "--html", ""],
                  ["-m", "torch.distributed.run", "--nproc-per-node", "4", "--master-port", str(free_port())] + job)
    assert full.returncode == 0, full.stderr[-6000:]
    virtual = dryrun(["--gpu", "8GiB", "--world-size", "4", "--ranks", "0,1,2,3", "--json", "--html", ""], job)
    assert virtual.returncode == 0, virtual.stderr[-6000:]
    got, want = peaks(json.loads(virtual.stdout)), peaks(json.loads(full.stdout))
    assert sorted(got) == [0, 1, 2, 3] and got == want, (got, want)
    assert all(nccl == 3 * nccl_model_bytes(CHANNELS) for nccl, _ in got.values()), got
    assert got[1][1]["pytorch"][0] > got[0][1]["pytorch"][0]  # the second tensor-parallel position holds more


def test_the_fsdp2_grpo_example_runs_its_phases_and_offloads_idle_state():
    """phasealloc.examples.fsdp2_grpo (policy and reference sharded with FSDP2) as one virtual rank of 8 at
    values:off: the four phases are detected, and under offload:auto phasealloc's replay moves pages
    (the reference outside inference, AdamW's state outside the optimizer step) where PyTorch's refuses."""
    job = ["-m", "phasealloc.examples.fsdp2_grpo", "--shape", "llama3-1b", "--prompt-tokens", "16", "--new-tokens", "8"]
    out = dryrun(["--values", "off", "--gpu", "80GiB", "--world-size", "8", "--ranks", "3", "--json", "--html", ""], job,
                 conf="offload:auto")
    assert out.returncode == 0, out.stderr[-6000:]
    assert "rank 3/8: GRPO llama3-1b, 2 steps of 1 x 8 responses of 16+8 tokens" in out.stderr, out.stderr[-3000:]
    (rank,) = json.loads(out.stdout)["per_rank"]["ranks"]
    assert rank["rank"] == 3 and rank["device"] == 3
    by_policy = {res["policy"]: res for res in json.loads(out.stdout)["processes"][0]["results"]}
    for res in by_policy.values():
        assert [p["name"] for p in res["phases"]] == ["unphased", "generation", "inference", "training", "optimizer"]
    ours = next(res for name, res in by_policy.items() if name.startswith("phasealloc"))
    assert ours["offloaded_bytes"] > 0 and ours["offload_failures"] == 0, ours
    assert by_policy["pytorch"]["offloaded_bytes"] == 0 and by_policy["pytorch"]["offload_failures"] > 0


def test_a_256_rank_job_runs_the_ranks_named_and_finds_the_one_that_runs_out(tmp_path):
    """Rank 1 of the uneven job holds 512 MiB more: of a 256-rank job, ranks 0 and 1 run (the other 254
    never start), NCCL's buffers are a rank's of 256, and on a 512 MiB GPU rank 1 runs out first."""
    job = [os.path.join(HERE, "uneven_ranks_job.py"), "64", "512"]
    out = dryrun(["--gpu", "512MiB", "--record-gpu", "4GiB", "--world-size", "256", "--ranks", "1,0", "--json",
                  "--html", ""], job)
    assert out.returncode == 0, out.stderr[-6000:]
    doc = json.loads(out.stdout)
    assert doc["virtual_ranks"]["world_size"] == 256 and doc["virtual_ranks"]["ran"] == [0, 1]
    assert doc["virtual_ranks"]["gpus_per_node"] == 8
    by_rank = {r["rank"]: r for r in doc["per_rank"]["ranks"]}
    assert sorted(by_rank) == [0, 1] and [by_rank[r]["device"] for r in (0, 1)] == [0, 1]
    assert all(r["nccl_peak_bytes"] == nccl_model_bytes(CHANNELS) for r in by_rank.values())
    assert all(res["ooms"] == 0 for res in by_rank[0]["results"])
    assert all(res["ooms"] > 0 for res in by_rank[1]["results"])
    assert all(first["rank"] == 1 and not first["fits"] for first in doc["per_rank"]["runs_out_first"])

    text = dryrun(["--gpu", "512MiB", "--record-gpu", "4GiB", "--world-size", "256", "--ranks", "0,1", "--html", ""],
                  job)
    assert text.returncode == 0, text.stderr[-6000:]
    assert "Values on the simulated GPU: observable in every process" in text.stdout, text.stdout[-3000:]
    assert ("Virtual ranks: ranks 0 and 1 of 256 ran, each alone (8 GPUs per node): the simulated NCCL answered "
            "for each one's 255 peers") in text.stdout, text.stdout[-3000:]


GLOO_JOB = """
import os, torch, torch.distributed as dist
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
dist.new_group(backend="gloo")
"""


def test_a_gloo_group_is_refused_naming_the_key_it_needs():
    """A gloo (CPU) group connects to its peers through the rendezvous store: with virtual peers that
    is refused with the key it would read, not left to fail inside gloo."""
    out = dryrun(["--world-size", "4", "--ranks", "1", "--html", ""], ["-c", GLOO_JOB])
    assert out.returncode != 0
    assert "which only an absent rank writes; a gloo (CPU) group connects to its peers through the store" in \
        out.stderr, out.stderr[-3000:]
    assert "rank 1 of 4 (virtual peers) exited with status 1" in out.stderr


def test_virtual_ranks_refuse_a_launcher_and_a_rank_outside_the_world(tmp_path):
    marker = tmp_path / "ran"
    out = dryrun(["--world-size", "4"], ["-m", "torch.distributed.run", "--nproc-per-node", "4", "-c",
                                         "open(%r, 'w')" % str(marker)])
    assert out.returncode != 0 and "give the job's own command (e.g. -- python train.py), not the launcher" in \
        out.stderr, out.stderr
    out = dryrun(["--world-size", "4", "--ranks", "0,4"], ["-c", "open(%r, 'w')" % str(marker)])
    assert out.returncode != 0 and '--ranks 0,4: "4" is not a rank of 0 to 3' in out.stderr, out.stderr
    out = dryrun(["--ranks", "1"], ["-c", "open(%r, 'w')" % str(marker)])
    assert out.returncode != 0 and "--ranks 1: needs --world-size" in out.stderr, out.stderr
    assert not marker.exists()
