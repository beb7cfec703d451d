#!/usr/bin/env python3
"""Writes the CUDA surface of a torch wheel: every CUDA-family function it imports, the library
and symbol-version node it binds to, the driver and NVML functions it looks up at run time, and
the versions it was built against. With --package, the same for another installed package that
loads CUDA beside torch (vllm, triton): its compiled extensions' imports, the driver functions
named in them and in the C sources it compiles at run time, and the NVML functions its Python
looks up through ctypes.

    wheel_surface.py [--torch-dir DIR] [-o FILE]
    wheel_surface.py --package NAME [-o FILE]

DIR is the installed torch package (default: found with importlib, without importing torch, so
this works where torch cannot load); NAME is found the same way. Needs binutils (nm, readelf).
"""

import argparse
import importlib.util
import os
import re
import subprocess
import sys

# Undefined symbols without a version node, by prefix: the libraries that do not version theirs,
# and cuBLAS/cuBLASLt, which do, imported unversioned by an extension that does not link them
# (vLLM's DeepGEMM binds to the copy torch loaded): the stand-in exports them under its node.
UNVERSIONED = [
    (re.compile(r"^cusparseLt"), "libcusparseLt.so.0", ""),
    (re.compile(r"^cuFile"), "libcufile.so.0", ""),
    (re.compile(r"^nccl"), "libnccl.so.2", ""),
    (re.compile(r"^cublasLt[A-Z]"), "libcublasLt.so.13", "libcublasLt.so.13"),
    (re.compile(r"^cublas[A-Z]"), "libcublas.so.13", "libcublas.so.13"),
    (re.compile(r"^cu[A-Z]"), "libcuda.so.1", ""),
]
# Version nodes that are not the library's SONAME.
NODE_LIBRARY = {"NVSHMEM": "libnvshmem_host.so.3"}
# A version node names a CUDA-family library when it is one's SONAME (or in NODE_LIBRARY).
CUDA_NODE = re.compile(r"^lib(cu|nv|nccl)[A-Za-z_]*\.so\.\d+$")


def fail(message):
    sys.exit("wheel_surface.py: " + message)


def torch_dir(given):
    if given:
        return given
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        fail("torch is not installed in this interpreter (pass --torch-dir)")
    return list(spec.submodule_search_locations)[0]


def elf_files(root):
    lib = os.path.join(root, "lib")
    files = [os.path.join(lib, f) for f in sorted(os.listdir(lib)) if ".so" in f]
    files += [os.path.join(root, f) for f in sorted(os.listdir(root)) if f.startswith("_C") and f.endswith(".so")]
    return files


def undefined(path):
    out = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True, text=True)
    if out.returncode != 0:
        fail("nm failed on %s: %s" % (path, out.stderr.strip()))
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-2] in ("U", "w"):
            yield parts[-1]


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def binds_now(path):
    """Whether the dynamic linker binds every symbol at load (DT_FLAGS BIND_NOW or FLAGS_1 NOW)."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return bool(re.search(r"\(FLAGS(_1)?\)\s+.*\bNOW\b|BIND_NOW", out))


def strings(path, pattern):
    data = open(path, "rb").read()
    return {m.decode() for m in re.findall(rb"(?<![A-Za-z0-9_])(" + pattern + rb")\x00", data)}


def cuda_header_functions(include_dir):
    """Driver functions declared in cuda.h, and the ABI name each base name maps to."""
    text = open(os.path.join(include_dir, "cuda.h"), encoding="utf-8", errors="replace").read()
    declared = set(re.findall(r"CUresult\s+CUDAAPI\s+(cu[A-Za-z0-9_]+)\s*\(", text))
    abi = {}
    for base, target in re.findall(r"^\s*#\s*define\s+(cu[A-Za-z0-9_]+)\s+(.+?)\s*$", text, re.M):
        m = re.match(r"^(?:__CUDA_API_PTDS|__CUDA_API_PTSZ)\((cu[A-Za-z0-9_]+)\)$", target) or \
            re.match(r"^(cu[A-Za-z0-9_]+)$", target)
        if m and base in declared and (m.group(1) in declared or re.search(r"_v\d+$", m.group(1))):
            abi.setdefault(base, m.group(1))
    return declared, abi


def versions(root):
    version_py = open(os.path.join(root, "version.py")).read()
    torch_version = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", version_py).group(1)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", version_py, re.M)
    facts = {"torch": torch_version, "cuda": cuda.group(1) if cuda else ""}
    site = os.path.dirname(root)
    for entry in os.listdir(site):
        if entry.startswith("torch-") and entry.endswith(".dist-info"):
            metadata = open(os.path.join(site, entry, "METADATA"), encoding="utf-8").read()
            m = re.search(r"^Requires-Dist: nvidia-cudnn-cu\d+==(\d+)\.(\d+)\.(\d+)", metadata, re.M)
            if m:
                facts["cudnn"] = "%s.%s.%s" % m.groups()
            m = re.search(r"^Requires-Dist: cuda-toolkit\[[^\]]*\]==([\d.]+)", metadata, re.M)
            if m:
                facts["cuda_toolkit"] = m.group(1)
    return facts


def package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        fail("package %s is not installed in this interpreter" % name)
    return list(spec.submodule_search_locations)[0]


def package_files(root, suffixes):
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(suffixes):
                yield os.path.join(directory, f)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def package_elf_files(root):
    return [p for p in package_files(root, (".so",)) if is_elf(p)]


def package_facts(root, name):
    """The package's version and the torch it requires, from its dist-info (without importing it)."""
    site = os.path.dirname(root)
    prefix = name.replace("-", "_") + "-"
    for entry in sorted(os.listdir(site)):
        if entry.startswith(prefix) and entry.endswith(".dist-info"):
            metadata = open(os.path.join(site, entry, "METADATA"), encoding="utf-8").read()
            facts = {"package": name, "version": re.search(r"^Version: (\S+)", metadata, re.M).group(1)}
            m = re.search(r"^Requires-Dist: torch\s*(==\s*[^;\s]+)", metadata, re.M)
            if m:
                facts["torch"] = m.group(1).replace(" ", "")
            return facts
    fail("no dist-info for %s in %s" % (name, site))


def imports(paths, symbols, nodes, deps, key):
    """The CUDA-family functions the ELF files import, with their library and node; deps gets each
    file's CUDA DT_NEEDED, under key(path)."""
    for path in paths:
        deps[key(path)] = [n for n in needed(path) if re.match(r"lib(cu|nv|nccl)", n)]
        for sym in undefined(path):
            if "@" in sym:
                name, node = sym.split("@", 1)
                node = node.lstrip("@")
                if not CUDA_NODE.match(node) and node not in NODE_LIBRARY:
                    continue
                library = NODE_LIBRARY.get(node, node)
                nodes[library] = node
            else:
                name = sym
                library, node = next(((lib, node) for rx, lib, node in UNVERSIONED if rx.match(name)), (None, None))
                if library is None:
                    continue
                nodes.setdefault(library, node)
            symbols[(library, name)] = "import"


def entry_points(names, include_dir, symbols, nodes, how):
    """Driver functions among names (the ones cuda.h declares), under their ABI names."""
    declared, abi = cuda_header_functions(include_dir)
    for base in sorted(names):
        if base in declared:
            symbols.setdefault(("libcuda.so.1", abi.get(base, base)), how)
            nodes.setdefault("libcuda.so.1", "")


def package_surface(root, include_dir):
    symbols, nodes, deps = {}, {}, {}
    elves = package_elf_files(root)
    imports(elves, symbols, nodes, deps, lambda p: os.path.relpath(p, root))
    # Driver functions reached at run time: named in an extension (cuGetProcAddress,
    # cudaGetDriverEntryPointByVersion) or in a C source the package compiles when it runs
    # (triton's driver.c, linked against libcuda.so.1).
    named = set()
    for path in elves:
        named |= strings(path, rb"cu[A-Z][A-Za-z0-9_]+")
    entry_points(named, include_dir, symbols, nodes, "entry point")
    compiled = set()
    for path in package_files(root, (".c",)):
        compiled |= set(re.findall(r"\b(cu[A-Z][A-Za-z0-9_]+)\b", open(path, encoding="utf-8", errors="replace").read()))
    entry_points(compiled, include_dir, symbols, nodes, "compiled at run time")
    # Functions looked up by name from Python through ctypes (vLLM's vendored pynvml, its CudaRTLibrary
    # and NCCLLibrary wrappers, Triton's driver.py): string literals that name a function of the
    # runtime, the driver or NCCL (declared in their headers), or of NVML (no header in the toolkit).
    runtime = set(re.findall(r"CUDARTAPI\s+(cuda[A-Za-z0-9_]+)\s*\(",
                             open(os.path.join(include_dir, "cuda_runtime_api.h"), encoding="utf-8",
                                  errors="replace").read()))
    # NCCL: the functions the toolkit's nccl.h declares; a name it does not mention at all is newer
    # than that header (the wheel's NCCL is) and counts unless it is a ctypes wrapper's own class
    # (ncclDataTypeEnum); a name it mentions otherwise is a type (ncclUniqueId).
    nccl_h = os.path.join(include_dir, "nccl.h")
    nccl_text = open(nccl_h).read() if os.path.exists(nccl_h) else ""
    nccl = set(re.findall(r"(?:ncclResult_t|const\s+char\s*\*)\s*(nccl[A-Z][A-Za-z0-9]*)\s*\(", nccl_text))
    nccl_mentioned = set(re.findall(r"\b(nccl[A-Z][A-Za-z0-9]*)\b", nccl_text))
    driver = set()
    for path in package_files(root, (".py",)):
        text = open(path, encoding="utf-8", errors="replace").read()
        if "ctypes" not in text:
            continue
        for name in set(re.findall(r"[\"']([a-z][A-Za-z0-9_]+)[\"']", text)):
            if name in runtime:
                symbols.setdefault(("libcudart.so.13", name), "dlsym")
                nodes.setdefault("libcudart.so.13", "libcudart.so.13")
            elif name in nccl or (re.match(r"^nccl[A-Z][A-Za-z0-9]+$", name) and name not in nccl_mentioned and
                                  not name.endswith("Enum")):
                symbols.setdefault(("libnccl.so.2", name), "dlsym")
                nodes.setdefault("libnccl.so.2", "")
            elif re.match(r"^nvml[A-Z][A-Za-z0-9_]+$", name):
                symbols.setdefault(("libnvidia-ml.so.1", name), "dlsym")
                nodes.setdefault("libnvidia-ml.so.1", "")
            elif name.startswith("cu"):
                driver.add(name)
    entry_points(driver, include_dir, symbols, nodes, "dlsym")
    return symbols, nodes, deps


def surface(root, include_dir):
    symbols = {}  # (library, name)
    nodes = {}    # library -> version node ("" when unversioned)
    deps = {}
    imports(elf_files(root), symbols, nodes, deps, os.path.basename)
    declared, abi = cuda_header_functions(include_dir)
    runtime = set()
    for name in ("libc10_cuda.so", "libtorch_cuda.so"):
        runtime |= strings(os.path.join(root, "lib", name), rb"cu[A-Z][A-Za-z0-9_]+")
    for base in sorted(runtime):
        target = abi.get(base, base)
        if base in declared:
            symbols.setdefault(("libcuda.so.1", target), "entry point")
            nodes.setdefault("libcuda.so.1", "")
    nvml = set()
    for name in ("libc10_cuda.so", "libtorch_cuda.so"):
        nvml |= strings(os.path.join(root, "lib", name), rb"nvml[A-Z][A-Za-z0-9_]+")
    for name in sorted(nvml):
        symbols[("libnvidia-ml.so.1", name)] = "dlsym"
        nodes["libnvidia-ml.so.1"] = ""
    return symbols, nodes, deps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-dir")
    parser.add_argument("--package", help="another package's surface (vllm, triton) instead of torch's")
    parser.add_argument("--cuda-include", default=os.environ.get("CUDA_INCLUDE", "/usr/local/cuda/include"))
    parser.add_argument("-o", "--output", default="-")
    args = parser.parse_args()
    if args.package:
        root = package_dir(args.package)
        symbols, nodes, deps = package_surface(root, args.cuda_include)
        lines = ["# The CUDA surface of the %s package: written by tools/simcuda/gen/wheel_surface.py --package, "
                 "do not edit." % args.package,
                 "# [symbols]: library, function, and how the package reaches it (import: an undefined symbol of an",
                 "# extension; entry point: a driver function named in an extension, reached through cuGetProcAddress;",
                 "# compiled_at_run_time: named in a C source it compiles and links against libcuda.so.1;",
                 "# dlsym: looked up by name from Python through ctypes).",
                 "[facts]"]
        facts = package_facts(root, args.package)
        elves = package_elf_files(root)
    else:
        root = torch_dir(args.torch_dir)
        symbols, nodes, deps = surface(root, args.cuda_include)
        lines = ["# The CUDA surface of the torch wheel: written by tools/simcuda/gen/wheel_surface.py, do not edit.",
                 "# [symbols]: library, function, and how torch reaches it (import: an undefined symbol;",
                 "# entry point: cudaGetDriverEntryPointByVersion / cuGetProcAddress; dlsym: dlopen'd library).",
                 "[facts]"]
        facts = versions(root)
        elves = elf_files(root)
    # Lazy binding: a function missing from a stand-in fails only when first called, which is why
    # tools/simcuda/tests/test_surface.py checks every export ahead of time.
    # Only the libraries that import CUDA functions matter (libgomp binds now, but imports none).
    cuda_users = [p for p in elves if any(n.startswith(("libcu", "libnv", "libnccl")) for n in needed(p))]
    facts["binding"] = "now" if any(binds_now(p) for p in cuda_users) else "lazy"
    for key, value in sorted(facts.items()):
        lines.append("%s = %s" % (key, value))
    lines.append("[libraries]")
    for library in sorted(nodes):
        lines.append("%s node=%s" % (library, nodes[library]))
    lines.append("[needed]")
    for elf in sorted(deps):
        if deps[elf]:
            lines.append("%s %s" % (elf, " ".join(deps[elf])))
    lines.append("[symbols]")
    for (library, name), how in sorted(symbols.items()):
        lines.append("%s %s %s" % (library, name, how.replace(" ", "_")))
    text = "\n".join(lines) + "\n"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
