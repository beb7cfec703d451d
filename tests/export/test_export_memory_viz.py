"""phasealloc export --policy SPEC writes the layout the policy placed in a replay, and PyTorch's own
torch.cuda._memory_viz reads it: its reserved and allocated bytes are the replay's, and every block
lies inside a segment."""

import json
import os
import pickle
import subprocess
import sys

import pytest

import torch_harness

TRACE = os.path.join(torch_harness.REPO, "tools", "data", "ppo-125m.patrace")


@pytest.mark.parametrize("policy", ["pytorch", "phasealloc"])
def test_export_is_the_replays_layout_and_memory_viz_agrees(tmp_path, policy):
    torch_harness.skip_or_fail()
    out = str(tmp_path / "export.pickle")
    subprocess.run([torch_harness.find_cli(), "export", TRACE, out, "--policy", policy], check=True, capture_output=True, text=True)
    replayed = json.loads(subprocess.run([torch_harness.find_cli(), "replay", TRACE, "--policy", policy, "--json"], check=True,
                                         capture_output=True, text=True).stdout)["results"][0]
    with open(out, "rb") as f:
        snap = pickle.load(f)

    # Every block inside its segment, blocks contiguous and covering it.
    for seg in snap["segments"]:
        cursor = seg["address"]
        for b in seg["blocks"]:
            assert b["address"] == cursor, (seg["address"], b)
            cursor += b["size"]
        assert cursor == seg["address"] + seg["total_size"]
    # The history's segment events replay to the replay's peak and to the final segments.
    reserved = peak = 0
    live = {}
    for e in snap["device_traces"][0]:
        if e["action"] in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        elif e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            assert e["addr"] in live, e
            del live[e["addr"]]
        peak = max(peak, reserved)
    assert peak == replayed["peak_reserved_bytes"], (peak, replayed["peak_reserved_bytes"])
    final_reserved = sum(seg["total_size"] for seg in snap["segments"])
    assert reserved == final_reserved
    # Every allocation live at the end is a block of a segment.
    active = {b["address"] for seg in snap["segments"] for b in seg["blocks"] if b["state"] != "inactive"}
    assert set(live) == active

    code = ("import pickle, sys\nfrom torch.cuda import _memory_viz as v\n"
            "snap = pickle.load(open(sys.argv[1], 'rb'))\nprint(v.segsum(snap))\n"
            "open(sys.argv[1] + '.html', 'w').write(v.trace_plot(snap))\n"
            "open(sys.argv[1] + '.seg.html', 'w').write(v.segment_plot(snap))\n")
    env = dict(os.environ, PHASEALLOC_SIMCUDA_DIR=torch_harness.find_simulator(), SIMCUDA_GPU="quiet:1")
    viz = subprocess.run([torch_harness.LAUNCHER, "--sim-gpu", "--native", "--", sys.executable, "-c", code, out],
                         env=env, capture_output=True, text=True, timeout=600)
    assert viz.returncode == 0, viz.stderr[-4000:]
    # memory_viz's total_allocated is the requested bytes of the allocated blocks.
    allocated = sum(b["requested_size"] for seg in snap["segments"] for b in seg["blocks"]
                    if b["state"] == "active_allocated")
    lines = viz.stdout
    fmt = _format_size
    assert "total_reserved: %s" % fmt(final_reserved) in lines, lines[-2000:]
    assert "total_allocated: %s" % fmt(allocated) in lines, lines[-2000:]
    assert os.path.getsize(out + ".html") > 1000 and os.path.getsize(out + ".seg.html") > 1000


def _format_size(num):
    """torch.cuda._memory_viz's own formatting of a byte count."""
    for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"]:
        if abs(num) < 1024.0:
            return f"{num:3.1f}{unit}B"
        num /= 1024.0
    return f"{num:.1f}YiB"
