"""Which allocator a process gets: phasealloc's swap (PHASEALLOC=1 through phasealloc-run, enable())
steps aside where PyTorch was asked for another backend, reads PyTorch's allocator variables as
PyTorch does, and refuses a c10 bridge built for another torch build. Each case asks the process
itself (torch.cuda.get_allocator_backend()), on the simulated GPU without a GPU.
"""

import subprocess
import sys

import pytest

from torch_harness import bridge_built, child_env, gpu_skip_reason, launcher

_REASON = gpu_skip_reason()
pytestmark = [pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]


def test_an_explicit_pytorch_backend_is_kept():
    """PYTORCH_ALLOC_CONF=...backend:cudaMallocAsync... set by the job itself: PyTorch's choice wins
    over PHASEALLOC=1, with a warning that says why phasealloc is not enabled."""
    code = ("import os\n"
            "os.environ['PYTORCH_ALLOC_CONF'] = 'max_split_size_mb:20,backend:cudaMallocAsync'\n"
            "import torch\n"
            "torch.cuda.init()\n"
            "print(torch.cuda.get_allocator_backend())\n")
    out = subprocess.run(launcher() + ["--", sys.executable, "-c", code], env=child_env("", "c10"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cudaMallocAsync", out.stdout + out.stderr
    assert "asks for PyTorch's 'cudaMallocAsync' allocator backend" in out.stderr, out.stderr


# Which of PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF names the backend, when both are set:
# PyTorch's own choice (under --native) is the judge of what phasealloc must agree with.
ALLOC_CONF_CASES = {
    "cuda_variable_only": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
    "generic_variable_only": {"PYTORCH_ALLOC_CONF": "max_split_size_mb:20,backend:cudaMallocAsync"},
    "cuda_variable_names_async_generic_native": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync",
                                                 "PYTORCH_ALLOC_CONF": "backend:native"},
    "cuda_variable_without_backend_generic_async": {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:20",
                                                    "PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"},
    "empty_cuda_variable_generic_async": {"PYTORCH_CUDA_ALLOC_CONF": "",
                                          "PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"},
}

@pytest.mark.parametrize("case", sorted(ALLOC_CONF_CASES))
def test_the_allocator_variables_are_read_as_pytorch_reads_them(case):
    """PyTorch 2.11 to 2.15 take their allocator settings from the first of PYTORCH_CUDA_ALLOC_CONF
    and PYTORCH_ALLOC_CONF that is set; phasealloc steps aside exactly when the backend PyTorch
    chose from them is not its native one, and names the variable it read."""
    code = "import torch\ntorch.cuda.init()\nprint('BACKEND', torch.cuda.get_allocator_backend())\n"

    def backend(native):
        env = child_env("", "c10")
        env.update(ALLOC_CONF_CASES[case])
        command = launcher() + (["--native"] if native else []) + ["--", sys.executable, "-c", code]
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return [line.split()[1] for line in out.stdout.splitlines() if line.startswith("BACKEND ")][0], out.stderr

    pytorchs, _ = backend(native=True)
    ours, stderr = backend(native=False)
    if pytorchs == "native":
        assert ours == "phasealloc", stderr
    else:
        assert ours == pytorchs, stderr
        variable = [v for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF") if v in ALLOC_CONF_CASES[case]][0]
        assert "%s asks for PyTorch's %r allocator backend" % (variable, pytorchs) in stderr, stderr

def test_a_bridge_built_for_another_torch_build_is_refused():
    """Same version string, another commit: another class layout. Both the package and the
    library itself refuse it, naming what differs."""
    if not bridge_built():
        pytest.skip("the c10 bridge was not built")
    code = ("import ctypes, types, torch, phasealloc\n"
            "from phasealloc import _bridge, _library\n"
            "_library.load()\n"
            "other = types.SimpleNamespace(__version__=torch.__version__, _C=torch._C,\n"
            "    version=types.SimpleNamespace(cuda=torch.version.cuda, git_version='0' * 40))\n"
            "try:\n"
            "    _bridge.install(other, _library.library_path())\n"
            "except _bridge.BridgeUnavailable as e:\n"
            "    print('PACKAGE', e)\n"
            "lib = ctypes.CDLL(_bridge.bridge_path(_library.library_path()))\n"
            "lib.phasealloc_c10_install.restype = ctypes.c_char_p\n"
            "lib.phasealloc_c10_install.argtypes = [ctypes.c_char_p]\n"
            "print('LIBRARY', lib.phasealloc_c10_install(b'version=2.0.0;git=x;cuda=13;abi=1').decode())\n"
            "print('BACKEND', torch.cuda.get_allocator_backend())\n")
    env = child_env("", "c10")
    out = subprocess.run(launcher() + ["--native", "--", sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert "was built for torch git=" in lines["PACKAGE"] and "this is torch git=" + "0" * 40 in lines["PACKAGE"]
    assert "the c10 bridge was built for torch version=" in lines["LIBRARY"], lines
    assert "this is torch version=2.0.0;git=x" in lines["LIBRARY"], lines
    assert lines["BACKEND"] == "native", lines
