"""Watching the processes of a multi-process job (a Ray cluster the job's driver starts, with its
actors and the processes they start) from outside, through /proc: which role each process has,
whether it holds simulated device memory, and whether phasealloc's allocator is loaded in it.

- role: Ray's process title without the method ("ray::PolicyModelActor.fit" -> "PolicyModelActor"),
  or vLLM's ("VLLM::EngineCore" -> "EngineCore", "VLLM::Worker" -> "Worker"); None for others.
- holds device memory: simcuda's memfd is mapped ("/memfd:simcuda-gpu").
- phasealloc loaded: the bridge phasealloc.enable() installs is mapped (libphasealloc_c10.so).

run_watched(command, ...) starts the job in a session of its own, samples its processes every
second until it exits (or, with stop_when, until stop_when(seen) holds), and kills the whole session
at the end: Ray's workers and vLLM's processes outlive a driver that is stopped.
"""

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
    return None


def observe(pid):
    """(holds simulated device memory, phasealloc's bridge loaded), or None when pid is gone."""
    try:
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read()
    except OSError:
        return None
    return "/memfd:simcuda-gpu" in maps, "libphasealloc_c10.so" in maps


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
    """Runs `command`; returns (exit status, or None when stopped by stop_when or the timeout, the
    output, {pid: (role, held device memory, phasealloc loaded)})."""
    log = open(log_path, "w+")
    job = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True)
    seen, deadline, stopped = {}, time.time() + timeout, False
    try:
        while job.poll() is None:
            if time.time() >= deadline:
                stopped = True
                break
            for pid in session_pids(job.pid):
                r, o = role(pid), observe(pid)
                if r and o:
                    held, loaded = seen.get(pid, (r, False, False))[1:]
                    seen[pid] = (r, held or o[0], loaded or o[1])
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
    return (None if stopped else job.returncode), output, seen


def holders_without_phasealloc(seen):
    """The processes that held device memory without phasealloc loaded, as "Role (pid N)"."""
    return sorted("%s (pid %d)" % (v[0], pid) for pid, v in seen.items() if v[1] and not v[2])


def holder_counts(seen):
    """{role: number of its processes that held device memory}."""
    counts = {}
    for r, held, _ in seen.values():
        if held:
            counts[r] = counts.get(r, 0) + 1
    return counts
