"""Shared set-up of the Python tests (no GPU, no torch needed).

The library comes from PHASEALLOC_LIBRARY (a built libphasealloc_torch.so); without it every test
that needs it is skipped with the reason. In this pytest process the library runs on the simulated
device with the configuration MAIN_CONF (set before the library is loaded; the configuration is
read once per process). Tests that need another configuration run a subprocess (run_python).

Test isolation inside this process: engines are per device, so each test file allocates on its own
devices (see DEVICES) and checks absolute numbers only there; phases are process-wide, so every
test leaves the explicit phase stack as it found it.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_DIR = os.path.join(REPO, "interpose", "python")
FAKES_DIR = os.path.join(HERE, "fakes")
LAUNCHER = os.path.join(PYTHON_DIR, "bin", "phasealloc-run")

MAIN_CONF = "device:model,model_capacity:64GiB,policy:basic,check_invariants:true"

# Devices each test file may allocate on in this process.
DEVICES = {
    "package": 0,     # the fake torch's current device
    "c_api": 1,
    "stats": 2,
    "misuse": 3,
    "oom": 4,
    "snapshot": 5,
    "record_stream": 6,
    "record_stream_other": 7,
    "trace": 8,
    "threads": 9,
    "host": 10,
    "host_other": 11,
    "host_trim": 12,
    "host_package": 13,
    "pressure": 14,
}

os.environ["PHASEALLOC_CONF"] = MAIN_CONF
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

LIBRARY = os.path.abspath(os.environ["PHASEALLOC_LIBRARY"]) if os.environ.get("PHASEALLOC_LIBRARY") else ""
SKIP_REASON = (
    "PHASEALLOC_LIBRARY is not set to a built libphasealloc_torch.so (build it, e.g. "
    "cmake -S . -B build -G Ninja && ninja -C build phasealloc_torch, then "
    "PHASEALLOC_LIBRARY=build/interpose/libphasealloc_torch.so)")


def library_available():
    return bool(LIBRARY) and os.path.exists(LIBRARY)


@pytest.fixture(scope="session")
def lib():
    """The library, loaded once in this process (through the package, so both share it)."""
    if not library_available():
        pytest.skip(SKIP_REASON)
    import phasealloc

    return phasealloc.load(LIBRARY)


def stats_of(lib, device):
    return json.loads(lib.phasealloc_stats_json(device).decode())


def last_error(lib):
    return lib.phasealloc_last_error().decode()


def subprocess_env(conf=None, fakes=False, extra=None):
    env = dict(os.environ)
    env.pop("PHASEALLOC", None)
    env["PHASEALLOC_LIBRARY"] = LIBRARY
    paths = [PYTHON_DIR] + ([FAKES_DIR] if fakes else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if conf is None:
        env.pop("PHASEALLOC_CONF", None)
    else:
        env["PHASEALLOC_CONF"] = conf
    env.update(extra or {})
    return env


def run_python(code, conf=None, fakes=False, extra=None, timeout=120, cwd=None):
    """Runs `python -c code` in a fresh process with the library; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-c", code], env=subprocess_env(conf, fakes, extra), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


# A prelude for subprocess snippets: the library through ctypes with its prototypes.
CTYPES_PRELUDE = """
import ctypes, json, os, sys
import phasealloc
lib = phasealloc.load(os.environ["PHASEALLOC_LIBRARY"])
def stats(device): return json.loads(lib.phasealloc_stats_json(device).decode())
def err(): return lib.phasealloc_last_error().decode()
"""
