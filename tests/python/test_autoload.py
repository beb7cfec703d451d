"""The environment-variable swap: PHASEALLOC=1, the .pth start-up hook, the phasealloc-run launcher.
Each case runs `import torch` (the fake one) in a fresh Python process."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import FAKES_DIR, LAUNCHER, LIBRARY, PYTHON_DIR, subprocess_env

PROBE = """
import torch
print("SWAPPED", torch.cuda.memory._current_allocator is not None)
import phasealloc
print("ENABLED", phasealloc.is_enabled())
"""
MODEL_DEVICE = "device:model,model_capacity:8GiB"


def run(args, env, timeout=120):
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)


def probe_lines(out):
    return dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)


def user_site_env(tmp_path, extra):
    """An environment whose user site-packages (a real site dir: .pth files run) holds our .pth."""
    env = subprocess_env(conf=MODEL_DEVICE, fakes=True, extra=extra)
    env["PYTHONUSERBASE"] = str(tmp_path / "userbase")
    env.pop("PYTHONNOUSERSITE", None)
    site_dir = subprocess.run([sys.executable, "-c", "import site; print(site.getusersitepackages())"],
                              env=env, capture_output=True, text=True).stdout.strip()
    enabled = subprocess.run([sys.executable, "-c", "import site; print(site.ENABLE_USER_SITE)"],
                             env=env, capture_output=True, text=True).stdout.strip()
    if enabled != "True":
        pytest.skip("this Python runs without a user site directory, where the test would put the .pth")
    os.makedirs(site_dir, exist_ok=True)
    shutil.copy(os.path.join(PYTHON_DIR, "phasealloc_autoload.pth"), site_dir)
    return env


def test_pth_hook_swaps_the_allocator_at_import_torch(lib, tmp_path):
    env = user_site_env(tmp_path, {"PHASEALLOC": "1"})
    out = run([sys.executable, "-c", PROBE], env)
    assert out.returncode == 0, out.stderr
    assert probe_lines(out) == {"SWAPPED": "True", "ENABLED": "True"}


def test_pth_hook_does_nothing_without_the_variable(lib, tmp_path):
    env = user_site_env(tmp_path, {})
    out = run([sys.executable, "-c", PROBE + "import sys; print('LOADED', 'phasealloc._phase_detect' in sys.modules)"],
              env)
    assert out.returncode == 0, out.stderr
    assert probe_lines(out) == {"SWAPPED": "False", "ENABLED": "False", "LOADED": "False"}


def test_cuda_already_initialised_gives_a_clear_warning_and_no_swap(lib, tmp_path):
    env = user_site_env(tmp_path, {"PHASEALLOC": "1", "FAKE_TORCH_CUDA_INITIALIZED": "1"})
    out = run([sys.executable, "-c", PROBE], env)
    assert out.returncode == 0, out.stderr
    assert probe_lines(out) == {"SWAPPED": "False", "ENABLED": "False"}
    assert "CUDA is already initialised in this process" in out.stderr
    assert "keeps PyTorch's native allocator" in out.stderr


@pytest.mark.parametrize("extra, expected", [
    ({"PHASEALLOC_CONF": "device:model,colour:red"}, "unknown key 'colour'"),
    # A NaN fraction used to pass the policy and abort the host process at its first allocation.
    ({"PHASEALLOC_CONF": "device:model,policy:[phasealloc:memory_fraction:nan]"},
     "bad value for 'memory_fraction': \"nan\" is not a finite number"),
    ({"PHASEALLOC_CONF": "device:model,policy:[pytorch:per_process_memory_fraction:inf]"},
     "bad value for 'per_process_memory_fraction': \"inf\" is not a finite number"),
    ({"PHASEALLOC_LIBRARY": "/nonexistent/libphasealloc_torch.so"}, "not found"),
])
def test_a_broken_setup_never_breaks_the_process(lib, tmp_path, extra, expected):
    env = user_site_env(tmp_path, dict(extra, PHASEALLOC="1"))
    out = run([sys.executable, "-c", PROBE + "print('RAN', 'to the end')"], env)
    assert out.returncode == 0, out.stderr
    assert probe_lines(out) == {"SWAPPED": "False", "ENABLED": "False", "RAN": "to the end"}
    lines = [line for line in out.stderr.splitlines() if line.startswith("phasealloc:")]
    assert len(lines) == 1 and "not enabled" in lines[0] and expected in lines[0]
    assert "PyTorch's own allocator" in lines[0]


def test_launcher_without_install_in_the_process_and_its_children(lib):
    env = subprocess_env(conf=None, fakes=True)
    env["PYTHONPATH"] = FAKES_DIR  # the launcher adds the package and its start-up hook itself
    code = PROBE + (
        "import subprocess, sys\n"
        "out = subprocess.run([sys.executable, '-c', %r], capture_output=True, text=True)\n"
        "print(out.stdout.replace('SWAPPED', 'CHILD_SWAPPED').replace('ENABLED', 'CHILD_ENABLED'), end='')\n"
        "sys.stderr.write(out.stderr)\n" % PROBE)
    out = run([LAUNCHER, "--conf", MODEL_DEVICE, "--library", LIBRARY, "--", sys.executable, "-c", code], env)
    assert out.returncode == 0, out.stderr
    assert probe_lines(out) == {"SWAPPED": "True", "ENABLED": "True", "CHILD_SWAPPED": "True",
                                "CHILD_ENABLED": "True"}


def test_launcher_library_given_relative_reaches_a_child_in_another_folder(lib, tmp_path):
    """Ray starts its workers in its own session folder: a relative --library (or PHASEALLOC_LIBRARY)
    must name the same file there, so the launcher makes it absolute against where it was started."""
    env = subprocess_env(conf=None, fakes=True)
    env["PYTHONPATH"] = FAKES_DIR
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = PROBE + (
        "import os, subprocess, sys\n"
        "out = subprocess.run([sys.executable, '-c', %r], capture_output=True, text=True, cwd=%r)\n"
        "print(out.stdout.replace('SWAPPED', 'CHILD_SWAPPED').replace('ENABLED', 'CHILD_ENABLED'), end='')\n"
        "print('LIBRARY', os.environ['PHASEALLOC_LIBRARY'])\n"
        "sys.stderr.write(out.stderr)\n" % (PROBE, str(elsewhere)))
    start = os.path.dirname(LIBRARY)
    out = subprocess.run([LAUNCHER, "--conf", MODEL_DEVICE, "--library", os.path.basename(LIBRARY), "--",
                          sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=start)
    assert out.returncode == 0, out.stderr
    lines = probe_lines(out)
    assert lines["LIBRARY"] == LIBRARY, lines
    assert lines["CHILD_SWAPPED"] == "True" and lines["CHILD_ENABLED"] == "True", (lines, out.stderr)


def test_launcher_trace_option_writes_one_file_per_process(lib, tmp_path):
    env = subprocess_env(conf=None, fakes=True)
    env["PYTHONPATH"] = FAKES_DIR
    code = PROBE + "torch.cuda._test_free(torch.cuda._test_malloc(4096), 4096)\n"
    out = run([LAUNCHER, "--conf", MODEL_DEVICE, "--trace", str(tmp_path / "t.%p.txt"), sys.executable, "-c", code], env)
    assert out.returncode == 0, out.stderr
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("t.")


def test_launcher_shadows_and_chains_an_existing_sitecustomize(lib, tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.SHADOWED_RAN = True\n")
    env = subprocess_env(conf=MODEL_DEVICE, fakes=True)
    env["PYTHONPATH"] = os.pathsep.join([FAKES_DIR, str(tmp_path)])
    out = run([LAUNCHER, sys.executable, "-c", PROBE + "import builtins; print('CHAINED', builtins.SHADOWED_RAN)"],
              env)
    assert out.returncode == 0, out.stderr
    assert probe_lines(out) == {"SWAPPED": "True", "ENABLED": "True", "CHAINED": "True"}


def test_launcher_usage():
    out = run([LAUNCHER], dict(os.environ))
    assert out.returncode == 2 and "usage: phasealloc-run" in out.stderr
    out = run([LAUNCHER, "--help"], dict(os.environ))
    assert out.returncode == 0 and "PHASEALLOC=1" in out.stdout
    out = run([LAUNCHER, "--bogus", "true"], dict(os.environ))
    assert out.returncode == 2 and "unknown option --bogus" in out.stderr


def test_the_package_never_imports_the_simulator():
    """phasealloc's package does not know its test double: no module of it imports simcuda (the
    simulator's adaptations are simcuda's own start-up, simcuda/_startup)."""
    import ast

    package = os.path.join(PYTHON_DIR, "phasealloc")
    offenders = []
    for folder, _, files in os.walk(package):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path) as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                offenders += ["%s:%d" % (os.path.relpath(path, package), node.lineno)
                              for n in names if n.split(".")[0] == "simcuda"]
    assert not offenders, offenders
