"""The one harness of the tests that run real PyTorch: simcuda's own tests (tools/simcuda/tests),
phasealloc's feature tests (tests/dryrun, export, oracle, launcher, packaging, ...) and the GPU tests
(tests/gpu, on simcuda in CI and on a GPU where there is one).

Finding: the launcher (interpose/python/bin/phasealloc-run), the simulated GPU's library folder
(PHASEALLOC_SIMCUDA_DIR, else the newest build*/simcuda/lib), phasealloc's library
(PHASEALLOC_LIBRARY, else the one of the simulator's build, else the newest build*/interpose) and
the `phasealloc` CLI of the simulator's build.

Where a child runs: simcuda's and the feature tests always run on the simulated GPU, at the size
they ask for (run(..., sim_gpu="80GiB")); the GPU tests pass sim_gpu=None and run on the machine's
GPU when it has one (/dev/nvidiactl), else on simcuda; PHASEALLOC_GPU_TESTS=sim or =gpu forces it.

The child protocol: a scenario file defines scenario_<name>(...) functions that assert and return a
JSON-able value (None when asserting is all they do), and ends with
`if __name__ == "__main__": child_main(globals())`, or child_main(globals(), "torch", "phasealloc")
to have those modules imported in the child and passed to every scenario. The child prints
"RESULT <json>" when the scenario returned. run(file, name, ...) starts `python FILE NAME` through
phasealloc-run and returns that value; a child that failed fails the test with its output. The
child is forked from a warm server (fork_server.py: torch imported once per launcher, interpreter
and environment), which behaves as the fresh process and starts in a third of its time;
PHASEALLOC_HARNESS_FORK=0 starts a fresh process per scenario instead.

Missing pieces (torch, a build, a GPU) skip with the reason, except when SIMCUDA_REQUIRE=1 (CI sets
it): then a missing piece of the simulator tests is a failure, so CI never passes by skipping.
"""

import atexit
import collections
import gc
import glob
import importlib
import importlib.util
import json
import os
import select
import socket
import subprocess
import sys
import tempfile

import fork_server  # beside this file: the protocol's ready line

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # tests/harness/ -> the repository
LAUNCHER = os.path.join(REPO, "interpose", "python", "bin", "phasealloc-run")
DEVICES = ("cuda_vmm", "cuda_runtime")  # phasealloc's devices that run on CUDA (device:NAME)
MIB = 1 << 20


# --- finding ------------------------------------------------------------------------------------


def _newest(pattern):
    found = glob.glob(os.path.join(REPO, pattern))
    return max(found, key=os.path.getmtime) if found else None


def find_simulator():
    """The built simulated GPU's library folder, or None."""
    env = os.environ.get("PHASEALLOC_SIMCUDA_DIR")
    if env:
        return env if os.path.exists(os.path.join(env, "libcudart.so.13")) else None
    found = _newest(os.path.join("build*", "simcuda", "lib", "libcudart.so.13"))
    return os.path.dirname(found) if found else None


def _build_dir():
    """The build folder the simulator comes from, or None."""
    sim = find_simulator()
    return os.path.dirname(os.path.dirname(sim)) if sim else None


def find_library():
    """libphasealloc_torch.so, or None."""
    env = os.environ.get("PHASEALLOC_LIBRARY")
    if env:
        return os.path.abspath(env) if os.path.exists(env) else None
    build = _build_dir()
    beside = os.path.join(build, "interpose", "libphasealloc_torch.so") if build else None
    if beside and os.path.exists(beside):
        return beside
    return _newest(os.path.join("build*", "interpose", "libphasealloc_torch.so"))


def find_venv_python(variable, package):
    """The interpreter of the venv named by environment variable `variable` (a framework's own venv,
    made by a tools/dev.sh target that names it) when `package` is installed there, or None."""
    venv = os.environ.get(variable)
    if not venv:
        return None
    python = os.path.join(venv, "bin", "python")
    found = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", package))
    return python if os.path.exists(python) and found else None


def find_release_bridge(variable, torch_version):
    """libphasealloc_torch.so built against torch `torch_version` (build*/torch-X.Y.Z, as tools/dev.sh
    builds it for a framework's venv), or the one environment variable `variable` names; or None."""
    env = os.environ.get(variable)
    if env:
        return os.path.abspath(env) if os.path.exists(env) else None
    return _newest(os.path.join("build*", "torch-" + torch_version, "interpose", "libphasealloc_torch.so"))


def find_cli():
    """The phasealloc CLI of the build the simulator comes from; skips the test when there is none."""
    import pytest

    path = os.path.join(_build_dir() or "/nonexistent", "tools", "cli", "phasealloc")
    if not os.path.exists(path):
        pytest.skip("no phasealloc CLI beside the simulator build (%s)" % path)
    return path


def on_simulator():
    """Whether the GPU tests run on the simulated GPU rather than a real one."""
    forced = os.environ.get("PHASEALLOC_GPU_TESTS")
    if forced in ("sim", "gpu"):
        return forced == "sim"
    return not os.path.exists("/dev/nvidiactl")


def bridge_built():
    """Whether the c10 bridge sits beside the library (built when the build saw a torch install)."""
    return os.path.exists(os.path.join(os.path.dirname(find_library()), "libphasealloc_c10.so"))


def bridges():
    """The ways phasealloc becomes torch's allocator that this build can test (PHASEALLOC_BRIDGE)."""
    return ("c10", "pluggable") if bridge_built() else ("pluggable",)


# --- skipping -----------------------------------------------------------------------------------


def missing():
    """Why the simulator tests cannot run here, or None."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed in this interpreter (tools/dev.sh test makes a venv with it)"
    if find_simulator() is None:
        return "the simulator is not built (build/simcuda/lib/libcudart.so.13): run tools/dev.sh build"
    return None


def skip_or_fail():
    """Skips the test when missing() names a reason; fails it instead under SIMCUDA_REQUIRE=1."""
    import pytest

    why = missing()
    if why is None:
        return
    if os.environ.get("SIMCUDA_REQUIRE") == "1":
        pytest.fail("SIMCUDA_REQUIRE=1 but " + why)
    pytest.skip(why)


def gpu_skip_reason():
    """Why the GPU tests cannot run here (on a GPU, or on simcuda without one), or None."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    if find_library() is None:
        return "libphasealloc_torch.so not found: build it and set PHASEALLOC_LIBRARY"
    if on_simulator():
        return None if find_simulator() else "no GPU and no simulated GPU (build tools/simcuda)"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    return None


def free_port():
    """A TCP port no one listens on now (the OS picks it): a job's rendezvous or a Ray head. A port
    derived from the test's own numbers collides with the previous job's, still in TIME_WAIT."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


# --- starting children --------------------------------------------------------------------------


def launcher(sim_gpu=None):
    """The command prefix that starts a child the way users start jobs: phasealloc-run, on simcuda of
    size sim_gpu; sim_gpu=None: on the machine's GPU, or on simcuda (default size) without one."""
    if sim_gpu is not None:
        return [LAUNCHER, "--sim-gpu=" + sim_gpu]
    return [LAUNCHER, "--sim-gpu"] if on_simulator() else [LAUNCHER]


def child_env(conf=None, bridge="auto", sim=None):
    """The environment of a child: this one, less PyTorch's allocator settings (PYTORCH_CUDA_ALLOC_CONF,
    PYTORCH_ALLOC_CONF), with this folder on
    PYTHONPATH (the child imports the harness); on simcuda (sim=None: when on_simulator()) its
    library folder and SIMCUDA_GPU=quiet:1 unless set. With conf (a PHASEALLOC_CONF string, "" for
    the defaults): phasealloc's library, that conf and PHASEALLOC_BRIDGE=bridge."""
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.pop("PYTORCH_ALLOC_CONF", None)
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    if on_simulator() if sim is None else sim:
        env["PHASEALLOC_SIMCUDA_DIR"] = find_simulator()
        env.setdefault("SIMCUDA_GPU", "quiet:1")
    if conf is not None:
        env["PHASEALLOC_BRIDGE"] = bridge
        env["PHASEALLOC_LIBRARY"] = find_library()
        env["PHASEALLOC_CONF"] = conf
    return env


def run(test_file, scenario, sim_gpu="80GiB", native=True, conf=None, bridge="auto", env=None, timeout=900,
        expect_ok=True, python=None):
    """Runs scenario_<scenario> of test_file in a fresh process started through phasealloc-run and
    returns what it returned (expect_ok=False: the finished process, for result()).
    sim_gpu: the simulated GPU's size, or None for the machine's GPU when it has one (launcher());
    native: PyTorch's own allocator (--native), else phasealloc swapped in; conf, bridge: see
    child_env; env: variables set for the child, last; python: the child's interpreter (default
    this one; another venv's, e.g. vLLM's with its own torch)."""
    if sim_gpu is not None:
        skip_or_fail()
    child = child_env(conf, bridge, sim=True if sim_gpu is not None else None)
    child.update(env or {})
    prefix = launcher(sim_gpu) + (["--native"] if native else []) + ["--", python or sys.executable]
    out = _run_child(prefix, child, os.path.abspath(test_file), [scenario], timeout)
    if not expect_ok:
        return out
    return result(out, scenario if conf is None else "%s (%r, bridge %s)" % (scenario, conf, bridge))


class _fork_server:
    """A started tests/harness/fork_server.py: torch imported once, a forked child per scenario."""

    def __init__(self, prefix, env, timeout):
        request_read, self.request_ = os.pipe()
        self.answer_, answer_write = os.pipe()
        out, err = tempfile.TemporaryFile(mode="w+"), tempfile.TemporaryFile(mode="w+")
        command = prefix + [os.path.join(HERE, "fork_server.py"), str(request_read), str(answer_write)]
        self.process_ = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         pass_fds=(request_read, answer_write))
        os.close(request_read)
        os.close(answer_write)
        self.requests_ = os.fdopen(self.request_, "w")
        self.answers_ = os.fdopen(self.answer_, "r")
        # Ready within the scenario's own time limit, or not at all (a hung import is killed, and
        # the caller starts the scenario as a fresh process, which meets the limit as before).
        self.ready_ = bool(select.select([self.answers_], [], [], timeout)[0]) and \
            self.answers_.readline().strip() == fork_server.READY
        if not self.ready_:
            self.process_.kill()
        # What the start-up printed (the simulated GPU's banner, warnings at import): a fresh
        # process prints it first, so every child's output begins with it.
        self.startup_ = []
        for file in (out, err):
            file.seek(0)
            self.startup_.append(file.read())
            file.close()

    def run(self, command, file, args, timeout):
        """The finished child as subprocess.run(command, capture_output=True, text=True) returns it;
        None when the server is gone (the caller starts a fresh process instead)."""
        with tempfile.TemporaryDirectory() as folder:
            request = {"file": file, "args": args, "cwd": os.getcwd(), "timeout_s": timeout,
                       "stdout": os.path.join(folder, "stdout"), "stderr": os.path.join(folder, "stderr")}
            try:
                self.requests_.write(json.dumps(request) + "\n")
                self.requests_.flush()
                answer = self.answers_.readline()
            except OSError:
                return None
            if not answer:
                return None
            answer = json.loads(answer)
            with open(request["stdout"]) as out, open(request["stderr"]) as err:
                stdout, stderr = self.startup_[0] + out.read(), self.startup_[1] + err.read()
        if answer["timed_out"]:
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
        return subprocess.CompletedProcess(command, answer["returncode"], stdout, stderr)

    def close(self):
        for pipe in (self.requests_, self.answers_):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.process_.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process_.kill()
            self.process_.wait()


_servers = collections.OrderedDict()  # least recently used first
_MAX_SERVERS = 6  # each holds an imported torch (about 300 MiB of its own)


def _close_servers():
    for server in _servers.values():
        server.close()
    _servers.clear()


atexit.register(_close_servers)


def _run_child(prefix, env, file, args, timeout):
    """Runs `PREFIX FILE ARGS...` (prefix: the launcher and the interpreter) with env and returns the
    finished process. Through a fork server for that prefix and environment (fork_server.py) unless
    PHASEALLOC_HARNESS_FORK=0 or the server did not start, which leaves a fresh process."""
    command = prefix + [file] + args
    if os.environ.get("PHASEALLOC_HARNESS_FORK", "1") != "0":
        env = {name: value for name, value in env.items() if name != "PYTEST_CURRENT_TEST"}  # set per test
        key = (tuple(prefix), tuple(sorted(env.items())))
        server = _servers.get(key)
        if server is None:
            while len(_servers) >= _MAX_SERVERS:
                _servers.popitem(last=False)[1].close()
            server = _servers[key] = _fork_server(prefix, env, timeout)
        _servers.move_to_end(key)
        out = server.run(command, file, args, timeout) if server.ready_ else None
        if out is not None:
            return out
        server.close()
        del _servers[key]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def result(out, scenario):
    """The value a scenario's child printed, from its finished process; fails the test if it failed."""
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert out.returncode == 0 and lines, "scenario %s failed (exit %d):\n%s\n%s" % (
        scenario, out.returncode, out.stdout[-4000:], out.stderr[-8000:])
    return json.loads(lines[-1][len("RESULT "):])


# --- child side ---------------------------------------------------------------------------------


def scenarios(namespace):
    """The scenario_<name> functions of a module's globals(), by name."""
    return {name[len("scenario_"):]: fn for name, fn in namespace.items() if name.startswith("scenario_")}


def child_main(namespace, *modules):
    """Runs the scenario sys.argv[1] names with the modules named in `modules` (imported here, in the
    child) as its arguments, and prints its value on the RESULT line."""
    value = scenarios(namespace)[sys.argv[1]](*[importlib.import_module(m) for m in modules])
    print("RESULT " + json.dumps(value), flush=True)
    # The exit's collections would walk every object torch made (seconds per child, in a suite of
    # hundreds); the atexit handlers and the modules' teardown still run.
    gc.freeze()
