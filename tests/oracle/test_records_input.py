"""The oracle driver's input (python -m phasealloc.torch_replay): records that `phasealloc convert
--records` writes, read with json and struct alone. What it refuses, it names, before torch is
imported."""

import os
import subprocess
import sys

import torch_harness

TRACE = os.path.join(torch_harness.REPO, "tools", "data", "ppo-125m.patrace")
PACKAGE = os.path.join(torch_harness.REPO, "interpose", "python")


def driver(path, tmp_path):
    env = dict(os.environ, PYTHONPATH=PACKAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "phasealloc.torch_replay", str(path), "--out", str(tmp_path / "r.json")],
                          env=env, capture_output=True, text=True, timeout=120)


def convert(tmp_path, *args):
    out = subprocess.run([torch_harness.find_cli(), "convert"] + list(args), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out


def test_records_are_read_and_a_text_trace_is_refused_by_name(tmp_path):
    records, text = tmp_path / "t.records", tmp_path / "t.txt"
    convert(tmp_path, "--records", TRACE, str(records))
    convert(tmp_path, "--text", TRACE, str(text))
    sys.path.insert(0, PACKAGE)
    try:
        from phasealloc.torch_replay import read_trace_records
    finally:
        sys.path.remove(PACKAGE)
    strings, events = read_trace_records(str(records))
    assert len(events) == 400798
    assert {"generation", "training", "optimizer"} <= set(strings)
    assert [e[1] for e in events].count("alloc") == 201376  # phasealloc inspect's count
    assert events[0][1] == "alloc" and events[0][3] > 0

    out = driver(text, tmp_path)
    assert out.returncode == 2
    assert "not a phasealloc trace records file" in out.stderr and "phasealloc convert --records" in out.stderr, \
        out.stderr


def test_truncated_records_are_refused_by_size(tmp_path):
    records = tmp_path / "t.records"
    convert(tmp_path, "--records", TRACE, str(records))
    with open(records, "r+b") as f:
        f.truncate(os.path.getsize(records) - 1)
    out = driver(records, tmp_path)
    assert out.returncode == 2
    assert "bytes of records, expected 400798 events of 40 bytes" in out.stderr, out.stderr


def test_convert_takes_one_output_format():
    out = subprocess.run([torch_harness.find_cli(), "convert", "--text", "--records", TRACE, "/dev/null"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "--records" in out.stderr and "excludes" in out.stderr, out.stderr
