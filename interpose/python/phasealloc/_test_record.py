"""Which allocator this process runs, asked inside it, for tests of multi-process jobs.

Rationale: a job test must know that every process holding device memory ran phasealloc (or, under
--native, PyTorch's own). Seen from outside, a mapped library proves nothing: the bridge is mapped
before the checks that can refuse it, and a refused bridge leaves PyTorch's allocator running.

Approach: with PHASEALLOC_TEST_RECORD_DIR set (tests only), the start-up hook (_autoload) queues a
call on torch's CUDA initialisation in every Python process; when the process initialises CUDA (so
before it can hold device memory), the call writes <dir>/<pid>.json with the process's title,
torch.cuda.memory.get_allocator_backend() and phasealloc.is_enabled(). The record is written then,
not at exit, because Ray ends its workers with SIGKILL.

Limitations: only Python processes that run the start-up hook (phasealloc-run, or the .pth of an
installed phasealloc) write a record; a test treats a device-memory holder without one as a failure.
"""

import json
import os
import sys

VARIABLE = "PHASEALLOC_TEST_RECORD_DIR"


def _title():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def write(directory):
    import torch

    phasealloc = sys.modules.get("phasealloc")
    record = {
        "pid": os.getpid(),
        "title": _title(),
        "backend": torch.cuda.memory.get_allocator_backend(),
        "phasealloc_enabled": bool(phasealloc is not None and phasealloc.is_enabled()),
    }
    path = os.path.join(directory, "%d.json" % os.getpid())
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def _write_quietly(directory):
    # Runs inside torch's CUDA initialisation, where an exception would fail it: never raise.
    try:
        write(directory)
    except Exception as exc:
        print("phasealloc: the test record was not written (%s: %s)" % (type(exc).__name__, exc), file=sys.stderr)


def on_torch_imported(torch):
    """Queues the record for the moment this process initialises CUDA."""
    directory = os.environ.get(VARIABLE)
    if directory:
        torch.cuda._lazy_call(lambda: _write_quietly(directory))
