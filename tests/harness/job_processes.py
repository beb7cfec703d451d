"""Watching the processes of a multi-process job (a Ray cluster the job's driver starts, with its
actors and the processes they start): which role each process has and whether it holds simulated
device memory, seen from outside through /proc; which allocator it ran, asked inside it.

- role: Ray's process title without the method ("ray::PolicyModelActor.fit" -> "PolicyModelActor"),
  or vLLM's ("VLLM::EngineCore" -> "EngineCore", "VLLM::Worker" -> "Worker"); for any other process
  its program's name ("python3").
- holds device memory: simcuda's memfd is mapped ("/memfd:simcuda-gpu").
- allocator: the record the process wrote when it initialised CUDA (record_env() asks for them;
  phasealloc/_test_record.py): torch.cuda.memory.get_allocator_backend() and phasealloc's enabled
  state. A mapped library proves nothing (the bridge is mapped before the checks that can refuse it).

run_watched(command, ...) starts the job in a session of its own, samples its processes every
second until it exits (or, with stop_when, until stop_when(seen) holds), and kills the whole session
at the end: Ray's workers and vLLM's processes outlive a driver that is stopped.
"""

import json
import os
import signal
import subprocess
import time


def role(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            title = f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return None
    for prefix in ("ray::", "VLLM::"):
        if title.startswith(prefix):
            return title[len(prefix):].split(".")[0].split(":")[0].split()[0]
    return os.path.basename(title.split()[0]) if title.strip() else None


def observe(pid):
    """Whether pid holds simulated device memory, or None when pid is gone."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read()
    except OSError:
        return None
    return "/memfd:simcuda-gpu" in maps


def record_env(env, directory):
    """Asks every Python process of a job started with env to record its allocator in directory."""
    os.makedirs(directory, exist_ok=True)
    env["PHASEALLOC_TEST_RECORD_DIR"] = str(directory)
    return env


def allocator_records(directory):
    """{pid: {"title", "backend", "phasealloc_enabled"}} from the records in directory."""
    records = {}
    for name in os.listdir(directory):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                record = json.load(f)
            records[record["pid"]] = record
    return records


def holders_not_running(seen, records, allocator):
    """The processes that held device memory and did not run `allocator` ("phasealloc" or
    "native"), as "Role (pid N): what its record says"."""
    want = {"backend": allocator, "phasealloc_enabled": allocator == "phasealloc"}
    wrong = []
    for pid, (name, held) in sorted(seen.items()):
        if not held:
            continue
        record = records.get(pid)
        if record is None:
            wrong.append("%s (pid %d): no record (it initialised CUDA without the start-up hook)" % (name, pid))
        elif {k: record[k] for k in want} != want:
            wrong.append("%s (pid %d): backend %r, phasealloc enabled %r" % (
                name, pid, record["backend"], record["phasealloc_enabled"]))
    return wrong


def session_pids(sid):
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getsid(int(entry)) == sid:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def run_watched(command, env, cwd, log_path, timeout, stop_when=None):
    """Runs `command`; returns (exit status, None when stop_when stopped it, or "timed out after N s";
    the output; {pid: (role, held device memory)})."""
    log = open(log_path, "w+")
    job = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
    seen, deadline, stopped = {}, time.time() + timeout, False
    try:
        while job.poll() is None:
            if time.time() >= deadline:
                stopped = "timed out"
                break
            for pid in session_pids(job.pid):
                r, held = role(pid), observe(pid)
                if r and held is not None:
                    seen[pid] = (r, held or seen.get(pid, (r, False))[1])
            if stop_when is not None and stop_when(seen):
                stopped = True
                break
            time.sleep(1)
    finally:
        for pid in session_pids(job.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        job.wait()
        log.seek(0)
        output = log.read()
        log.close()
    if stopped == "timed out":
        return "timed out after %d s" % timeout, output, seen
    return (None if stopped else job.returncode), output, seen


# What phasealloc prints when a process does not swap (phasealloc/__init__.py, _autoload.py).
REFUSALS = ("phasealloc: not enabled", "phasealloc: c10 bridge unavailable", "keeps PyTorch's native allocator",
            "phasealloc is not enabled", "phasealloc: start-up hook failed")


def refusals(output):
    """The lines of a job's output where a process said it did not swap in phasealloc."""
    return [line for line in output.splitlines() if any(r in line for r in REFUSALS)]


def holder_counts(seen):
    """{role: number of its processes that held device memory}."""
    counts = {}
    for r, held in seen.values():
        if held:
            counts[r] = counts.get(r, 0) + 1
    return counts
