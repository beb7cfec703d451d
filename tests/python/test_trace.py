"""Traces: phasealloc_trace_start/stop, the trace key of PHASEALLOC_CONF, one file per process."""

import os
import re
import subprocess
import sys

from conftest import CTYPES_PRELUDE, DEVICES, last_error, run_python, subprocess_env

MIB = 1 << 20


def read_text_trace(path):
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0].startswith("# phasealloc-trace v")
    events = [line.split() for line in lines if line and line[0].isdigit()]
    return lines, events


def test_trace_start_and_stop_write_the_file(lib, tmp_path):
    device = DEVICES["trace"]
    pattern = str(tmp_path / "run.%p.%d.txt")
    assert lib.phasealloc_trace_start(pattern.encode()) == 0
    assert lib.phasealloc_trace_start(pattern.encode()) == -1
    assert "already running" in last_error(lib)
    assert lib.phasealloc_phase_begin(b"generation") == 0
    ptrs = [lib.phasealloc_try_malloc(n, device, None) for n in (1000, 2 * MIB, 3000)]
    assert lib.phasealloc_phase_end() == 0
    for p, n in zip(ptrs, (1000, 2 * MIB, 3000)):
        lib.phasealloc_free(p, n, device, None)
    assert lib.phasealloc_trace_stop() == 0
    assert lib.phasealloc_trace_stop() == -1
    assert "no trace is running" in last_error(lib)

    path = tmp_path / ("run.%d.%d.txt" % (os.getpid(), device))
    lines, events = read_text_trace(path)
    ops = [e[1] for e in events]
    assert ops.count("alloc") == 3 and ops.count("free") == 3
    assert "phase" in ops and any('"generation"' in line for line in lines)
    assert [int(e[3]) for e in events if e[1] == "alloc"] == [1000, 2 * MIB, 3000]
    # Every engine of the process got its own file (the %d in the pattern).
    assert len(list(tmp_path.iterdir())) >= 1


def test_binary_trace_and_device_suffix(lib, tmp_path):
    pattern = str(tmp_path / "bin.patrace")
    device = DEVICES["trace"]
    assert lib.phasealloc_trace_start(pattern.encode()) == 0
    p = lib.phasealloc_try_malloc(4096, device, None)
    lib.phasealloc_free(p, 4096, device, None)
    assert lib.phasealloc_trace_stop() == 0
    path = tmp_path / ("bin.dev%d.patrace" % device)  # no %d: device N > 0 gets .devN
    with open(path, "rb") as f:
        assert f.read(4) == b"\x89PAT"


def test_every_process_writes_its_own_file_at_exit(lib, tmp_path):
    pattern = str(tmp_path / "job.%r.%p.txt")
    code = CTYPES_PRELUDE + """
MIB = 1 << 20
assert lib.phasealloc_phase_begin(b"generation") == 0
ptrs = [lib.phasealloc_try_malloc(MIB * (i + 1), 0, None) for i in range(5)]
assert lib.phasealloc_phase_set(b"training") == 0
for i, p in enumerate(ptrs):
    lib.phasealloc_free(p, MIB * (i + 1), 0, None)
print(os.getpid())
"""
    pids = []
    for rank in range(3):
        out = run_python(code, conf="device:model,trace:[%s]" % pattern, extra={"RANK": str(rank)})
        assert out.returncode == 0, out.stderr
        pids.append(int(out.stdout.strip()))
    files = sorted(os.listdir(tmp_path))
    assert files == sorted("job.%d.%d.txt" % (rank, pid) for rank, pid in enumerate(pids))
    for name in files:
        lines, events = read_text_trace(tmp_path / name)
        assert [e[1] for e in events].count("alloc") == 5
        assert any('"training"' in line for line in lines)


def test_python_trace_context_manager_in_subprocesses(lib, tmp_path):
    pattern = str(tmp_path / "ctx.%p.txt")
    code = CTYPES_PRELUDE + """
with phasealloc.trace(%r):
    with phasealloc.phase("rollout"):
        p = lib.phasealloc_try_malloc(4096, 0, None)
        lib.phasealloc_free(p, 4096, 0, None)
print(os.getpid())
""" % pattern
    outs = [run_python(code, conf="device:model") for _ in range(2)]
    for out in outs:
        assert out.returncode == 0, out.stderr
        path = tmp_path / ("ctx.%s.txt" % out.stdout.strip())
        lines, events = read_text_trace(path)
        assert [e[1] for e in events].count("alloc") == 1
        assert any('"rollout"' in line for line in lines)
        assert re.search(r"allocator_settings \".*device:model", "\n".join(lines))


def test_the_role_names_the_trace_file(lib, tmp_path):
    """%R in the pattern is the process's role (PHASEALLOC_ROLE), empty without one."""
    pattern = str(tmp_path / "rank%r.role%R.pid%p.txt")
    code = CTYPES_PRELUDE + """
p = lib.phasealloc_try_malloc(1 << 20, 0, None)
lib.phasealloc_free(p, 1 << 20, 0, None)
print(os.getpid())
"""
    names = []
    for role in ("trainer", "rollout", None):
        extra = {"RANK": "0"}
        if role is not None:
            extra["PHASEALLOC_ROLE"] = role
        out = run_python(code, conf="device:model,trace:[%s]" % pattern, extra=extra)
        assert out.returncode == 0, out.stderr
        names.append("rank0.role%s.pid%s.txt" % (role or "", out.stdout.strip()))
    assert sorted(os.listdir(tmp_path)) == sorted(names), (os.listdir(tmp_path), names)


def test_a_process_killed_without_exit_handlers_leaves_its_trace_as_of_its_last_phase(lib, tmp_path):
    """Ray ends a job's workers with SIGKILL: the trace checkpointed at phase transitions and
    empty_cache survives, a whole file (the events up to the last checkpoint), where the exit flush
    never runs."""
    pattern = str(tmp_path / "killed.%p.txt")
    # The sleeps let each checkpoint come due (one waits 99 times the last one's write, a few ms at most here).
    code = CTYPES_PRELUDE + """
import signal, time
MIB = 1 << 20
assert lib.phasealloc_phase_set(b"generation") == 0
ptrs = [lib.phasealloc_try_malloc(MIB * (i + 1), 0, None) for i in range(4)]
time.sleep(0.5)
assert lib.phasealloc_phase_set(b"training") == 0
lib.phasealloc_free(ptrs[0], MIB, 0, None)
time.sleep(0.5)
assert lib.phasealloc_phase_set(b"optimizer") == 0
lib.phasealloc_try_malloc(7 * MIB, 0, None)
time.sleep(0.5)
lib.phasealloc_reset()  # empty_cache: checkpointed with the 7 MiB block
lib.phasealloc_try_malloc(9 * MIB, 0, None)  # after the last checkpoint: lost
print(os.getpid(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    out = run_python(code, conf="device:model,trace:[%s]" % pattern)
    assert out.returncode == -9, out.stderr
    files = os.listdir(tmp_path)
    assert files == ["killed.%s.txt" % out.stdout.strip()], files  # no temporary file left either
    lines, events = read_text_trace(tmp_path / files[0])
    ops = [e[1] for e in events]
    assert [int(e[3]) for e in events if e[1] == "alloc"] == [MIB, 2 * MIB, 3 * MIB, 4 * MIB, 7 * MIB], events
    assert ops.count("free") == 1, ops
    assert any('"optimizer"' in line for line in lines)


def test_a_process_that_never_changes_phase_leaves_its_trace_when_killed(lib, tmp_path):
    """A Ray actor allocates, answers and waits to be killed, with no phase transition and no
    empty_cache: the background checkpoint (every 250 ms) writes its trace all the same."""
    pattern = str(tmp_path / "quiet.%p.txt")
    code = CTYPES_PRELUDE + """
import signal, time
lib.phasealloc_try_malloc(3 << 20, 0, None)
time.sleep(1.0)
print(os.getpid(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    out = run_python(code, conf="device:model,trace:[%s]" % pattern)
    assert out.returncode == -9, out.stderr
    files = os.listdir(tmp_path)
    assert files == ["quiet.%s.txt" % out.stdout.strip()], files
    _, events = read_text_trace(tmp_path / files[0])
    assert [int(e[3]) for e in events if e[1] == "alloc"] == [3 << 20], events


def test_a_ray_or_vllm_process_title_names_the_role_when_none_is_set(lib, tmp_path):
    """%R without a configured role is the name Ray or vLLM titled the process with (Ray writes
    "ray::ACTOR.METHOD" over argv, as setproctitle does: done here through /proc/self/stat's argv
    bounds); a configured role wins."""
    pattern = str(tmp_path / "role%R.pid%p.txt")
    code = CTYPES_PRELUDE + """
title = sys.argv[1].encode() + b"\\0"
with open("/proc/self/stat") as f:
    fields = f.read().rsplit(")", 1)[1].split()
arg_start, arg_end = int(fields[45]), int(fields[46])  # fields 48 and 49 of proc(5)
assert len(title) <= arg_end - arg_start
ctypes.memmove(arg_start, title, len(title))
p = lib.phasealloc_try_malloc(1 << 20, 0, None)
lib.phasealloc_free(p, 1 << 20, 0, None)
print(os.getpid())
"""
    names = []
    for title, role, expected in (("ray::WorkerDict.actor_rollout_compute_log_prob", None, "WorkerDict"),
                                  ("VLLM::Worker", None, "Worker"), ("python", None, ""),
                                  ("ray::WorkerDict.fit", "trainer", "trainer")):
        extra = {"PHASEALLOC_ROLE": role} if role else {}
        out = subprocess.run([sys.executable, "-c", code, title], env=subprocess_env("device:model,trace:[%s]" % pattern,
                                                                                     False, extra),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        names.append("role%s.pid%s.txt" % (expected, out.stdout.strip()))
    assert sorted(os.listdir(tmp_path)) == sorted(names), (os.listdir(tmp_path), names)
