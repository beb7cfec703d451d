"""phasealloc-run --sim-gpu: the one way in to the simulator, with phasealloc or PyTorch's own
allocator, for a command and every process it starts."""

import os
import subprocess
import sys

import torch_harness

def bridge_built():
    """Whether this build made the c10 bridge (it needs a torch install at build time)."""
    build_dir = os.path.dirname(os.path.dirname(torch_harness.find_simulator()))
    return os.path.exists(os.path.join(build_dir, "interpose", "libphasealloc_c10.so"))


SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher_scenarios.py")


def test_phasealloc_is_the_allocator_on_the_simulated_gpu():
    r = torch_harness.run(SCENARIOS, "swap", native=False)
    assert r["backend"] == ("phasealloc" if bridge_built() else "pluggable")
    assert r["intact"] is True
    assert r["allocated"] >= (1 + 7 + 64 + 300) << 20
    assert r["reserved"] == r["mapped"] > 0  # phasealloc's books are the simulator's
    assert "(cuda_vmm, policy phasealloc" in r["summary"]
    assert r["unemulated"] == 0


def test_native_keeps_pytorchs_allocator():
    r = torch_harness.run(SCENARIOS, "swap", native=True)
    assert r["backend"] == "native"
    assert r["reserved"] == r["mapped"] > 0


def test_children_inherit_the_simulated_gpu():
    r = torch_harness.run(SCENARIOS, "children", sim_gpu="24GiB", env={"SIMCUDA_GPU": "quiet:1,name:NVIDIA L4"})
    assert r["child"] == "NVIDIA L4 %d" % (24 << 30)


def test_a_bad_size_is_named():
    out = torch_harness.run(SCENARIOS, "swap", sim_gpu="huge", expect_ok=False)
    assert out.returncode == 2
    assert "phasealloc-run: --sim-gpu=huge: not a size (e.g. 80GiB, 24GB, 512MiB)" in out.stderr
    out = torch_harness.run(SCENARIOS, "swap", sim_gpu="1MiB", expect_ok=False)  # a size, below the minimum
    assert out.returncode == 2
    assert "bad value '1MiB' for memory (expected a size from 64MiB to 64TiB" in out.stderr


def test_missing_simulator_libraries_are_named():
    torch_harness.skip_or_fail()
    env = dict(os.environ, PHASEALLOC_SIMCUDA_DIR="/nonexistent/simcuda")
    out = subprocess.run([torch_harness.LAUNCHER, "--sim-gpu", "--", "true"], env=env, capture_output=True, text=True)
    assert out.returncode == 2
    assert "the simulated GPU's libraries were not found in /nonexistent/simcuda" in out.stderr


def test_an_installed_package_runs_on_the_simulated_gpu(tmp_path):
    """cmake --install --prefix X puts the stand-ins in the package (phasealloc/simcuda/), where the
    installed launcher finds them, relative to itself, without the source tree."""
    torch_harness.skip_or_fail()
    build_dir = os.path.dirname(os.path.dirname(torch_harness.find_simulator()))
    subprocess.run(["cmake", "--install", build_dir, "--prefix", str(tmp_path)], check=True, capture_output=True)
    package_dir = os.path.join(str(tmp_path), "lib", "python3", "dist-packages")
    assert os.path.exists(os.path.join(package_dir, "phasealloc", "simcuda", "libcudart.so.13"))
    env = dict(os.environ, SIMCUDA_GPU="quiet:1")
    for name in ("PHASEALLOC_SIMCUDA_DIR", "PHASEALLOC_PYTHON_DIR"):
        env.pop(name, None)
    env.pop("PHASEALLOC_LIBRARY", None)
    code = ("import torch; x = torch.ones(10, device='cuda'); "
            "print(torch.cuda.memory.get_allocator_backend(), torch.cuda.get_device_properties(0).total_memory)")
    out = subprocess.run([os.path.join(str(tmp_path), "bin", "phasealloc-run"), "--sim-gpu=32GiB", "--", sys.executable,
                          "-c", code], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    # The bridge is installed beside the library when the build had it.
    assert out.stdout.split() == ["phasealloc" if bridge_built() else "pluggable", str(32 << 30)]
