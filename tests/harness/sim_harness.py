"""What the tests that run PyTorch on simcuda share: finding the built simulator, and running one
scenario of a scenario file in a fresh process on the simulated GPU through phasealloc-run --sim-gpu
(simcuda's own tests in tools/simcuda/tests, and phasealloc's feature tests under tests/). A child
reads the simulator's books through simcuda's Python side (simcuda.introspect), which the launcher
puts on its path.

A scenario file defines scenario_<name>() functions returning a JSON-able dict, and ends with
`if __name__ == "__main__": child_main(globals())`. The pytest side calls run(file, name, ...),
which starts `phasealloc-run --sim-gpu=SIZE [--native] -- python FILE NAME` and returns the dict
the child printed on its "RESULT " line.

Without torch or without a build the tests skip with the reason, except when SIMCUDA_REQUIRE=1
(CI sets it): then a missing piece is a failure, so CI never passes by skipping.
"""

import glob
import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))  # tests/harness/ -> the repository
LAUNCHER = os.path.join(REPO, "interpose", "python", "bin", "phasealloc-run")


def sim_dir():
    env = os.environ.get("PHASEALLOC_SIMCUDA_DIR")
    if env:
        return env if os.path.exists(os.path.join(env, "libcudart.so.13")) else None
    found = glob.glob(os.path.join(REPO, "build*", "simcuda", "lib", "libcudart.so.13"))
    return os.path.dirname(max(found, key=os.path.getmtime)) if found else None


def phasealloc_cli():
    """The phasealloc CLI of the build the simulator comes from; skips the test when there is none."""
    import pytest

    build_dir = os.path.dirname(os.path.dirname(sim_dir() or "/nonexistent/x/y"))
    path = os.path.join(build_dir, "tools", "cli", "phasealloc")
    if not os.path.exists(path):
        pytest.skip("no phasealloc CLI beside the simulator build (%s)" % path)
    return path


def missing():
    """Why the simulator tests cannot run here, or None."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed in this interpreter (tools/dev.sh test makes a venv with it)"
    if sim_dir() is None:
        return "the simulator is not built (build/simcuda/lib/libcudart.so.13): run tools/dev.sh build"
    return None


def skip_or_fail():
    import pytest

    why = missing()
    if why is None:
        return
    if os.environ.get("SIMCUDA_REQUIRE") == "1":
        pytest.fail("SIMCUDA_REQUIRE=1 but " + why)
    pytest.skip(why)


def run(test_file, scenario, sim_gpu="80GiB", native=True, env=None, timeout=900, expect_ok=True):
    skip_or_fail()
    child_env = dict(os.environ)
    child_env["PHASEALLOC_SIMCUDA_DIR"] = sim_dir()
    child_env.setdefault("SIMCUDA_GPU", "quiet:1")
    child_env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    child_env["PYTHONPATH"] = HERE + os.pathsep + child_env.get("PYTHONPATH", "")
    child_env.update(env or {})
    command = [LAUNCHER, "--sim-gpu=" + sim_gpu] + (["--native"] if native else [])
    command += ["--", sys.executable, os.path.abspath(test_file), scenario]
    out = subprocess.run(command, env=child_env, capture_output=True, text=True, timeout=timeout)
    return out if not expect_ok else result(out, scenario)


def result(out, scenario):
    """The dict a scenario's child printed, from its finished process; fails the test if it failed."""
    lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
    assert out.returncode == 0 and lines, "scenario %s failed (exit %d):\n%s\n%s" % (
        scenario, out.returncode, out.stdout[-4000:], out.stderr[-8000:])
    return json.loads(lines[-1][len("RESULT "):])


# --- child side ---------------------------------------------------------------------------------


def child_main(namespace):
    name = sys.argv[1]
    result = namespace["scenario_" + name]()
    print("RESULT " + json.dumps(result), flush=True)
