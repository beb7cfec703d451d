"""phasealloc installed with `pip install .` into this interpreter (tools/dev.sh test does it): the
installed phasealloc-run runs a job on the simulated GPU with phasealloc as the allocator, and out
of memory is torch.cuda.OutOfMemoryError (the c10 companion was built against this torch)."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import torch_harness

JOB = """
import torch, phasealloc
assert phasealloc.__file__.startswith(PREFIX), phasealloc.__file__  # the installed package
x = torch.arange(1 << 20, dtype=torch.float32).cuda()
backend = torch.cuda.memory.get_allocator_backend()
try:
    torch.empty(90 << 30, dtype=torch.uint8, device="cuda")
    kind = "none"
except torch.cuda.OutOfMemoryError as e:
    kind = "OutOfMemoryError" if "phasealloc: out of memory" in str(e) else "foreign"
print("RESULT", backend, kind, torch.equal(x.cpu(), torch.arange(1 << 20, dtype=torch.float32)))
"""


def installed_launcher():
    path = os.path.join(os.path.dirname(sys.executable), "phasealloc-run")
    if os.path.exists(path):
        return path
    if os.environ.get("PHASEALLOC_REQUIRE_PIP_INSTALL") == "1":
        pytest.fail("PHASEALLOC_REQUIRE_PIP_INSTALL=1 but %s does not exist (pip install . failed?)" % path)
    pytest.skip("phasealloc is not pip-installed in this interpreter (tools/dev.sh test installs it)")


def user_env(bin_dir):
    """A user's environment: none of the source tree's variables."""
    return {"PATH": bin_dir + os.pathsep + os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/"), "SIMCUDA_GPU": "quiet:1"}


def test_the_pip_installed_launcher_runs_a_job_on_the_simulated_gpu(tmp_path):
    launcher = installed_launcher()
    # A user's environment: none of the source tree's variables, run from elsewhere.
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "SIMCUDA_GPU": "quiet:1"}
    code = "PREFIX = %r\n" % sys.prefix + JOB
    out = subprocess.run([launcher, "--sim-gpu", "--", "python", "-c", code], env=env, cwd=str(tmp_path),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    result = [l for l in out.stdout.splitlines() if l.startswith("RESULT")]
    # pip install . built against this interpreter's torch: the c10 bridge is the allocator.
    assert result == ["RESULT phasealloc OutOfMemoryError True"], out.stdout + out.stderr


def test_without_the_variable_the_installed_hook_imports_nothing():
    installed_launcher()
    env = dict(os.environ)
    for name in ("PHASEALLOC", "PHASEALLOC_SIM_ADAPT", "PYTHONPATH"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", "import sys; print('phasealloc' in sys.modules)"], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    env["PHASEALLOC_SIM_ADAPT"] = "1"  # the simulator's variable: its own start-up reads it, not the product's
    out = subprocess.run([sys.executable, "-c", "import sys; print('phasealloc' in sys.modules)"], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    env.update(PHASEALLOC_SIM_ADAPT="0", PHASEALLOC="1")  # the .pth does act on the variable it is for
    out = subprocess.run([sys.executable, "-c", "import sys; print('phasealloc._autoload' in sys.modules)"], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def readme_use_it_commands():
    """The command lines of the README's "Use it in a PyTorch job" block, comments removed."""
    readme = os.path.join(torch_harness.REPO, "README.md")
    with open(readme) as f:
        text = f.read()
    section = text[text.index("## Use it in a PyTorch job"):]
    block = section[section.index("```sh\n") + len("```sh\n"):]
    block = block[:block.index("```")]
    lines = []
    for line in block.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command:
            lines.append(command)
    return lines


def test_the_readme_use_it_commands_run_as_written(tmp_path):
    """Every command of the README's "Use it" block, as written, in a user's environment with the
    pip-installed package: the GPU ones run on the simulated GPU (phasealloc-run --sim-gpu --native
    only supplies the GPU; the line itself sets PHASEALLOC)."""
    launcher = installed_launcher()
    commands = readme_use_it_commands()
    assert commands[0].startswith("pip install ."), commands  # done by tools/dev.sh test
    assert len(commands) >= 5, commands
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "SIMCUDA_GPU": "quiet:1"}
    for command in commands[1:]:
        if command.startswith("phasealloc-run --sim-gpu"):
            argv = ["bash", "-c", command]
        else:
            argv = [launcher, "--sim-gpu", "--native", "--", "bash", "-c", command]
        out = subprocess.run(argv, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, "%s\n%s\n%s" % (command, out.stdout[-3000:], out.stderr[-6000:])
        tables = out.stdout.count("phasealloc, device 0 (")
        ranks = 2 if "--nproc-per-node 2" in command else 1
        assert tables == ranks, "%s: %d phase tables in\n%s" % (command, tables, out.stdout[-3000:])
        assert "step 2:" in out.stdout, out.stdout[-3000:]


def test_the_installed_cli_never_uses_the_clone_it_was_built_from(tmp_path):
    """pip install from this checkout (kept in place), then the installed `phasealloc dryrun` and
    `phasealloc replay --engine torch`, run from elsewhere: the job imports the installed package
    (with its libraries), not the clone's interpose/python, which has none."""
    installed_launcher()
    cli = os.path.join(os.path.dirname(sys.executable), "phasealloc")
    assert os.path.exists(cli), cli
    traces = tmp_path / "traces"
    job = ("import torch, phasealloc\n"
           "assert phasealloc.__file__.startswith(%r), phasealloc.__file__\n"
           "xs = [torch.empty(n << 20, dtype=torch.uint8, device='cuda') for n in (1, 3, 8, 20)]\n"
           "del xs[1]\n"
           "ys = [torch.empty(5 << 20, dtype=torch.uint8, device='cuda') for _ in range(3)]\n") % sys.prefix
    out = subprocess.run([cli, "dryrun", "--gpu", "1GiB", "--json", "-q", "--html", "", "--trace-dir", str(traces),
                          "--", "python", "-c", job], env=user_env(os.path.dirname(sys.executable)),
                         cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "not enabled" not in out.stderr, out.stderr
    assert "nothing to replay" not in out.stdout + out.stderr
    recorded = glob.glob(str(traces / "*.patrace"))
    assert len(recorded) == 1, recorded
    out = subprocess.run([cli, "replay", recorded[0], "--engine", "torch", "-p", "pytorch", "--json", "-q"],
                         env=dict(user_env(os.path.dirname(sys.executable)), PHASEALLOC_PYTHON=sys.executable),
                         cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert result["results"][0]["peak_allocated_bytes"] >= (1 + 8 + 20 + 15) << 20, result["results"][0]


def test_no_path_of_the_source_tree_is_baked_into_an_installed_file():
    installed_launcher()
    root = os.path.realpath(torch_harness.REPO).encode()
    import phasealloc
    package = os.path.dirname(phasealloc.__file__)
    bin_dir = os.path.dirname(sys.executable)
    files = [os.path.join(bin_dir, name) for name in ("phasealloc", "phasealloc-run")]
    files += [os.path.join(d, f) for d, _, names in os.walk(package) for f in names if ".so" in f]
    assert len(files) >= 5, files
    # The tree's path, or a path inside it (not a longer name that starts with it: a venv at
    # /tmp/treehome/... beside a tree at /tmp/tree).
    baked = re.compile(re.escape(root) + rb"(?=[/\x00])")
    for path in files:
        with open(path, "rb") as f:
            assert not baked.search(f.read()), "%s contains the source tree's path %s" % (path, root.decode())


def test_an_isolated_pip_wheel_has_the_bridge_and_works_where_it_is_installed(tmp_path):
    """`pip wheel .` with build isolation (what `pip install .` and `pip install git+...` do):
    the build finds this interpreter's torch outside its isolated environment, so the wheel has
    the c10 bridge and the OOM companion; installed elsewhere, it swaps in and raises
    torch.cuda.OutOfMemoryError."""
    if os.environ.get("PHASEALLOC_REQUIRE_PIP_INSTALL") != "1":
        pytest.skip("builds phasealloc once more (minutes): run by tools/dev.sh test")
    wheels = tmp_path / "wheels"
    # A fresh build folder (emptied first: nothing configured before is reused) at the path
    # tools/dev.sh's `pip install .` builds in: with its ccache (paths hashed relative to the build
    # folder) the same compiles are cache hits, and only the configure step and the links run again.
    build_dir = os.path.join(torch_harness.REPO, "build-pip")
    shutil.rmtree(build_dir, ignore_errors=True)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                            "--config-settings=build-dir=" + build_dir, torch_harness.REPO],
                           capture_output=True, text=True, timeout=3000)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-5000:]
    wheel = glob.glob(str(wheels / "phasealloc-*.whl"))
    assert len(wheel) == 1, wheel
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), wheel[0]],
                   check=True, capture_output=True, timeout=600)
    for name in ("libphasealloc_torch.so", "libphasealloc_c10.so", "libphasealloc_torch_oom.so"):
        assert (site / "phasealloc" / name).exists(), name
    launcher = site / "bin" / "phasealloc-run"
    code = "PREFIX = %r\n" % str(site) + JOB
    out = subprocess.run([str(launcher), "--sim-gpu", "--", "python", "-c", code], env=user_env(str(site / "bin")),
                         cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    result = [l for l in out.stdout.splitlines() if l.startswith("RESULT")]
    assert result == ["RESULT phasealloc OutOfMemoryError True"], out.stdout + out.stderr
