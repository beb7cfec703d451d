"""The simulator covers the wheels: the checked-in CUDA surface of the installed torch
(tools/simcuda/surface/torch-X.Y.Z.txt) is that wheel's, and every stand-in exports every function
of every checked-in surface under the real SONAME and symbol-version node. A torch upgrade that
needs new functions fails here with their names."""

import glob
import os
import re
import subprocess
import sys

import pytest

import torch_harness

SIMCUDA = os.path.join(torch_harness.REPO, "tools", "simcuda")
SURFACES = sorted(glob.glob(os.path.join(SIMCUDA, "surface", "torch-*.txt")) +
                  glob.glob(os.path.join(SIMCUDA, "surface", "package-*.txt")))


def read_surface(path):
    section, libraries, symbols = None, {}, set()
    facts = {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
        elif section == "[facts]":
            key, _, value = line.partition("=")
            facts[key.strip()] = value.strip()
        elif section == "[libraries]":
            name, node = line.split()
            libraries[name] = node.split("=", 1)[1]
        elif section == "[symbols]":
            library, name, _ = line.split()
            symbols.add((library, name))
    return libraries, symbols, facts


def union_of_surfaces():
    libraries, symbols = {}, set()
    for path in SURFACES:
        more_libraries, more_symbols, _ = read_surface(path)
        libraries.update(more_libraries)
        symbols |= more_symbols
    return libraries, symbols


def record_checked(surface):
    """Appends the surface's name to $PHASEALLOC_SURFACES_CHECKED, when set: tools/dev.sh test runs
    these tests in every venv and fails when a checked-in surface was compared with no installed
    wheel (a surface nobody checks could say anything)."""
    path = os.environ.get("PHASEALLOC_SURFACES_CHECKED")
    if path:
        with open(path, "a") as f:
            f.write(os.path.basename(surface) + "\n")


def extras(library):
    path = os.path.join(SIMCUDA, "surface", "extra_%s.txt" % library)
    if not os.path.exists(path):
        return set()
    return {l.split("#", 1)[0].strip() for l in open(path)} - {""}


def test_the_checked_in_surface_is_the_installed_wheels(tmp_path):
    torch_harness.skip_or_fail()
    out = tmp_path / "surface.txt"
    subprocess.run([sys.executable, os.path.join(SIMCUDA, "gen", "wheel_surface.py"), "-o", str(out)], check=True)
    _, installed, facts = read_surface(str(out))
    release = facts["torch"].split("+", 1)[0]
    surface = os.path.join(SIMCUDA, "surface", "torch-%s.txt" % release)
    assert os.path.exists(surface), (
        "no checked-in surface for the installed torch %s: write it with gen/wheel_surface.py -o %s" % (
            facts["torch"], os.path.relpath(surface, torch_harness.REPO)))
    _, checked_in, _ = read_surface(surface)
    added = sorted("%s %s" % s for s in installed - checked_in)
    removed = sorted("%s %s" % s for s in checked_in - installed)
    assert not added and not removed, (
        "the installed torch's CUDA surface differs from %s (regenerate it with gen/wheel_surface.py, then emulate "
        "what the new functions need):\n  needs now: %s\n  no longer: %s" % (surface, added, removed))
    record_checked(surface)


def exported(path):
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TWiV":
            name, _, node = parts[2].partition("@@")
            table[name] = node.lstrip("@")
    return table


def soname(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else None


def test_every_stand_in_exports_its_surface_under_the_real_soname_and_node():
    torch_harness.skip_or_fail()
    libraries, symbols = union_of_surfaces()
    lib_dir = torch_harness.find_simulator()
    problems = []
    for library, node in sorted(libraries.items()):
        path = os.path.join(lib_dir, library)
        if not os.path.exists(path):
            problems.append("%s: not built" % library)
            continue
        if soname(path) != library:
            problems.append("%s: SONAME is %s" % (library, soname(path)))
        table = exported(path)
        wanted = {name for lib, name in symbols if lib == library}
        for name in sorted(wanted):
            if name not in table:
                problems.append("%s: does not export %s" % (library, name))
            elif table[name] != node:
                problems.append("%s: %s is under node '%s', the wheel asks for '%s'" % (library, name, table[name], node))
        stray = set(table) - wanted - extras(library) - {node}
        if stray:
            problems.append("%s: exports %s beyond its surface and extras" % (library, sorted(stray)[:10]))
    assert problems == []


def test_every_dt_needed_cuda_library_of_the_wheel_has_a_stand_in():
    torch_harness.skip_or_fail()
    needed = set()
    for surface in SURFACES:
        section = None
        for line in open(surface):
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[needed]" and line:
                needed.update(line.split()[1:])
    assert needed, "the surface lists no DT_NEEDED CUDA libraries"
    missing = sorted(n for n in needed if not os.path.exists(os.path.join(torch_harness.find_simulator(), n)))
    assert missing == []


def test_the_checked_in_package_surfaces_are_the_installed_packages(tmp_path):
    """Each surface/package-NAME-X.Y.Z.txt whose package is installed here at that version (the vLLM
    venv has vllm, triton and torchvision) is what gen/wheel_surface.py --package reads from it."""
    import importlib.metadata

    torch_harness.skip_or_fail()
    checked = 0
    for surface in SURFACES:
        _, checked_in, facts = read_surface(surface)
        if "package" not in facts:
            continue
        try:
            installed_version = importlib.metadata.version(facts["package"])
        except importlib.metadata.PackageNotFoundError:
            continue
        if installed_version != facts["version"]:
            continue
        out = tmp_path / ("%s.txt" % facts["package"])
        subprocess.run([sys.executable, os.path.join(SIMCUDA, "gen", "wheel_surface.py"), "--package", facts["package"],
                        "-o", str(out)], check=True)
        _, installed, _ = read_surface(str(out))
        added = sorted("%s %s" % s for s in installed - checked_in)
        removed = sorted("%s %s" % s for s in checked_in - installed)
        assert not added and not removed, "%s differs from the installed %s:\n  needs now: %s\n  no longer: %s" % (
            surface, facts["package"], added, removed)
        record_checked(surface)
        checked += 1
    if checked == 0 and not os.environ.get("PHASEALLOC_SURFACES_CHECKED"):
        # Under tools/dev.sh test (PHASEALLOC_SURFACES_CHECKED set) a venv without any of these
        # packages (the main venv) has nothing to compare, and the run checks that every package
        # surface was compared in some venv.
        pytest.skip("no package with a checked-in surface is installed at its version here")
