"""What the GPU tests share: finding the library, the skip reason, and running one scenario in a
fresh process started through phasealloc-run (PHASEALLOC=1: the swap happens at `import torch`).

Without a GPU the scenarios run on simcuda, the simulated GPU (tools/simcuda): the children are
started with `phasealloc-run --sim-gpu`, so real PyTorch runs them on simulated memory. A GPU
is used when the machine has one (/dev/nvidiactl); PHASEALLOC_GPU_TESTS=sim or =gpu forces it.

A test file defines scenario_<name>(torch, phasealloc) functions, and ends with
`if __name__ == "__main__": child_main(scenarios(globals()), sys.argv[1])`. Its pytest side calls
run_scenario(__file__, name, conf), which runs the file as `python <file> <name>` and asserts
that the child printed "SCENARIO OK".
"""

import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LAUNCHER = os.path.join(REPO, "interpose", "python", "bin", "phasealloc-run")
DEVICES = ("cuda_vmm", "cuda_runtime")
MIB = 1 << 20


def find_library():
    env = os.environ.get("PHASEALLOC_LIBRARY")
    if env:
        return os.path.abspath(env) if os.path.exists(env) else None
    found = glob.glob(os.path.join(REPO, "build*", "interpose", "libphasealloc_torch.so"))
    return max(found, key=os.path.getmtime) if found else None


def find_simulator():
    """The built simulated GPU's library folder, or None."""
    env = os.environ.get("PHASEALLOC_SIMCUDA_DIR")
    if env:
        return env if os.path.exists(os.path.join(env, "libcudart.so.13")) else None
    found = glob.glob(os.path.join(REPO, "build*", "simcuda", "lib", "libcudart.so.13"))
    return os.path.dirname(max(found, key=os.path.getmtime)) if found else None


def on_simulator():
    """Whether the scenarios run on the simulated GPU rather than a real one."""
    forced = os.environ.get("PHASEALLOC_GPU_TESTS")
    if forced in ("sim", "gpu"):
        return forced == "sim"
    return not os.path.exists("/dev/nvidiactl")


def launcher():
    """The command prefix that starts a child the way users start jobs (on the simulator here)."""
    return [LAUNCHER, "--sim-gpu"] if on_simulator() else [LAUNCHER]


def skip_reason():
    """Why the GPU tests cannot run here, or None."""
    import importlib.util

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


def scenarios(namespace):
    """The scenario_<name> functions of a module's globals(), by name."""
    return {name[len("scenario_"):]: fn for name, fn in namespace.items() if name.startswith("scenario_")}


def child_main(table, name):
    import torch
    import phasealloc

    table[name](torch, phasealloc)
    print("SCENARIO OK")


def bridge_built():
    """Whether the c10 bridge sits beside the library (built when the build saw a torch install)."""
    return os.path.exists(os.path.join(os.path.dirname(find_library()), "libphasealloc_c10.so"))


def bridges():
    """The ways phasealloc becomes torch's allocator that this build can test (PHASEALLOC_BRIDGE)."""
    return ("c10", "pluggable") if bridge_built() else ("pluggable",)


def child_env(conf, bridge="auto"):
    env = dict(os.environ)
    env["PHASEALLOC_BRIDGE"] = bridge
    env["PHASEALLOC_LIBRARY"] = find_library()
    env["PHASEALLOC_CONF"] = conf
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if on_simulator():
        env["PHASEALLOC_SIMCUDA_DIR"] = find_simulator()
        env.setdefault("SIMCUDA_GPU", "quiet:1")
    return env


def run_scenario(test_file, scenario, conf, bridge="auto", native=False, env=None):
    """native: PyTorch's own allocator (phasealloc-run --native); env: variables added for the child."""
    child = child_env(conf, bridge)
    child.update(env or {})
    out = subprocess.run(launcher() + (["--native"] if native else []) + ["--", sys.executable,
                                                                          os.path.abspath(test_file), scenario],
                         env=child, capture_output=True, text=True, timeout=600)
    print(out.stdout)
    print(out.stderr, file=sys.stderr)
    assert out.returncode == 0 and "SCENARIO OK" in out.stdout, (
        "scenario %s (%s, bridge %s) failed (exit %d):\n%s\n%s" % (scenario, conf, bridge, out.returncode, out.stdout,
                                                                 out.stderr))
