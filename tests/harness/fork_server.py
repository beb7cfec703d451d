"""A warm start for the harness's children: one process per configuration imports torch once, then
forks a child for each scenario, which runs as `python FILE SCENARIO` would have.

Rationale: a scenario's child spends about 7 s before its first line runs (3 s importing torch, 4 s
more at the first CUDA call, where torch imports torch._dynamo), and the suites start hundreds of
them. Forking after the imports, before CUDA is initialised, is what PyTorch allows (a DataLoader
forked before the model moves to the GPU) and what phasealloc's fork guard leaves free: no engine
and no CUDA context exist yet in this process.
Approach: torch_harness.run starts this file through phasealloc-run with the child's environment,
launcher options and interpreter (one server per distinct set of them, kept for the pytest
process's life), and sends it one request per scenario on the request pipe: a JSON line with the
scenario's file, its arguments and the files for its stdout and stderr. The server forks; the child
points fds 1 and 2 at those files, unwinds out of the server loop and runs the file as __main__
with those arguments (runpy), so an exception, an exit code and the atexit handlers behave as in a
fresh interpreter. The server answers with the child's exit status, killing it at the request's
timeout.
Limitations: the child is the server's child, not the launcher's; its modules imported before the
fork (torch, torch._dynamo, phasealloc's start-up hook) are the server's, imported with the same
environment. PHASEALLOC_HARNESS_FORK=0 turns the server off (a fresh process per scenario).
"""

import gc
import json
import os
import runpy
import signal
import sys
import time

READY = "ready"


def _wait(pid, timeout_s):
    """The child's exit status as subprocess reports it (negative: the signal), and whether it was
    killed at the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status), True
        time.sleep(0.02)


def _serve(requests, answers):
    """Forks a child per request; returns the request in the child, None when the requests end."""
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            requests.close()
            answers.close()
            return request
        code, timed_out = _wait(pid, request["timeout_s"])
        answers.write(json.dumps({"returncode": code, "timed_out": timed_out}) + "\n")
        answers.flush()
    return None


def _become(request):
    """Turns this forked child into `python FILE ARGS...` with its output in the request's files."""
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.chdir(request["cwd"])
    sys.argv = [request["file"]] + request["args"]
    sys.path[0] = os.path.dirname(request["file"])


def main():
    request_fd, answer_fd = int(sys.argv[1]), int(sys.argv[2])
    import torch  # noqa: F401  what every scenario imports first
    import torch._dynamo  # noqa: F401  imported by torch at the first CUDA call
    # What the imports made is never garbage: kept out of every collection (the child's included,
    # and the ones at its exit, which otherwise walk torch's objects for seconds), and its pages
    # stay shared with the children (no copy on write from the collector's bookkeeping).
    gc.freeze()

    requests = os.fdopen(request_fd, "r")
    answers = os.fdopen(answer_fd, "w")
    answers.write(READY + "\n")
    answers.flush()
    return _serve(requests, answers)


if __name__ == "__main__":
    _request = main()
    if _request is not None:
        _become(_request)
        runpy.run_path(_request["file"], run_name="__main__")
