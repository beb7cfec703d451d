#!/usr/bin/env python3
"""Emits the generated part of one stand-in library from the wheels' surface files: a C file with
a weak, loud stub for every function of that library, and the GNU ld version script that exports
them (and the hand-written extras) under the library's symbol-version node.

    gen_stubs.py --surface FILE [--surface FILE ...] --library SONAME [--extra FILE] --out-c FILE --out-map FILE

A hand-written emulation in the same shared library overrides a stub at link time (the stub is
weak). A stub that runs prints "simcuda: LIB: FUNCTION is not emulated ..." through
simcuda_unemulated(), returns the library's "not supported" status, and aborts under strict:1.
Functions that return a string or a version number rather than a status get a stub of that
type, so a caller never reads a status code as a pointer.
"""

import argparse
import os
import re
import sys

# The status each library's stubs return: its "not supported" code (values from the CUDA 13
# headers; NVML's from its documentation, nvml.h is not in the toolkit).
NOT_SUPPORTED = {
    "libcudart.so.13": (801, "cudaErrorNotSupported"),
    "libcuda.so.1": (801, "CUDA_ERROR_NOT_SUPPORTED"),
    "libcublas.so.13": (15, "CUBLAS_STATUS_NOT_SUPPORTED"),
    "libcublasLt.so.13": (15, "CUBLAS_STATUS_NOT_SUPPORTED"),
    "libcudnn.so.9": (3000, "CUDNN_STATUS_NOT_SUPPORTED"),
    "libcusparse.so.12": (10, "CUSPARSE_STATUS_NOT_SUPPORTED"),
    "libcusparseLt.so.0": (10, "CUSPARSE_STATUS_NOT_SUPPORTED"),
    "libcufft.so.12": (16, "CUFFT_NOT_SUPPORTED"),
    "libcusolver.so.12": (9, "CUSOLVER_STATUS_NOT_SUPPORTED"),
    "libnvrtc.so.13": (11, "NVRTC_ERROR_INTERNAL_ERROR (NVRTC has no 'not supported')"),
    "libcupti.so.13": (27, "CUPTI_ERROR_NOT_SUPPORTED"),
    "libnccl.so.2": (5, "ncclInvalidUsage"),
    "libcufile.so.0": (5030, "CU_FILE_PLATFORM_NOT_SUPPORTED-range error (CUfileError_t.err)"),
    "libnvshmem_host.so.3": (-1, "NVSHMEM's error return"),
    "libnvidia-ml.so.1": (3, "NVML_ERROR_NOT_SUPPORTED"),
    "libcurand.so.10": (999, "CURAND_STATUS_INTERNAL_ERROR (cuRAND has no 'not supported')"),
    "libnvjpeg.so.13": (9, "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED"),
}

STRING_RETURN = re.compile(r"(GetErrorString|GetErrorName|GetStatusString|GetStatusName|GetResultString|"
                           r"GetCallbackName)$")
SIZE_RETURN = re.compile(r"^(cudnnGetVersion|cudnnGetCudartVersion|cudnnGetMaxDeviceVersion|"
                         r"cublasLtGetVersion|cublasLtGetCudartVersion|cublasGetCudartVersion)$")


def fail(message):
    sys.exit("gen_stubs.py: " + message)


def read_surface(path, library):
    if not os.path.exists(path):
        fail("%s: no such surface file" % path)
    section, node, names = None, None, []
    for number, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        parts = line.split()
        if section == "[libraries]" and parts[0] == library:
            node = parts[1].split("=", 1)[1] if len(parts) > 1 and parts[1].startswith("node=") else ""
        elif section == "[symbols]":
            if len(parts) != 3:
                fail("%s:%d: expected 'library symbol how', got %r" % (path, number, line))
            if parts[0] == library:
                names.append(parts[1])
    if node is None and not names:
        node = ""  # a stand-in the wheel does not import (only hand-written exports)
    return node or "", sorted(set(names))


def read_extra(path):
    if not path or not os.path.exists(path):
        return []
    names = []
    for number, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", line):
            fail("%s:%d: not a symbol name: %r" % (path, number, line))
        names.append(line)
    return names


# Every stub lies in this section: the linker's __start_/__stop_ symbols for it bound the stubs'
# code, so cuGetProcAddress can tell a stub from an emulation of the same name (src/driver/).
SECTION = "simcuda_stubs"


def stub(library, name, code):
    call = 'simcuda_unemulated("%s", "%s", %d)' % (library, name, code)
    attributes = '__attribute__((weak, section("%s")))' % SECTION
    if STRING_RETURN.search(name):
        return ('%s const char* %s(void) {\n  %s;\n  return "simcuda: %s is not emulated";\n}\n'
                % (attributes, name, call, name))
    if SIZE_RETURN.match(name):
        return "%s size_t %s(void) {\n  %s;\n  return 0;\n}\n" % (attributes, name, call)
    return "%s int %s(void) { return %s; }\n" % (attributes, name, call)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--surface", required=True, action="append",
                        help="a torch wheel's surface file; several: the stand-in serves each of those wheels")
    parser.add_argument("--library", required=True)
    parser.add_argument("--extra")
    parser.add_argument("--out-c", required=True)
    parser.add_argument("--out-map", required=True)
    args = parser.parse_args()
    if args.library not in NOT_SUPPORTED:
        fail("no 'not supported' status known for %s (add it to NOT_SUPPORTED)" % args.library)
    code, code_name = NOT_SUPPORTED[args.library]
    node, names = "", set()
    nodes = {}  # node -> the surface file that binds the library to it
    for path in args.surface:
        path_node, path_names = read_surface(path, args.library)
        if path_names:
            nodes.setdefault(path_node, path)
            node = path_node
        names |= set(path_names)
    if len(nodes) > 1:
        fail("%s binds to different symbol-version nodes in %s" % (
            args.library, ", ".join("%s (%r)" % (path, n) for n, path in nodes.items())))
    names = sorted(names)
    extra = read_extra(args.extra)
    c = ["/* Generated by tools/simcuda/gen/gen_stubs.py for %s from %s: do not edit. */" % (
            args.library, ", ".join(os.path.basename(p) for p in args.surface)),
         "/* Every function of the wheels' surfaces, as a weak stub; src/ emulations override them. */",
         "/* Stubs return %d (%s). */" % (code, code_name),
         "#include <stddef.h>",
         "int simcuda_unemulated(const char* library, const char* function, int code);",
         ""]
    c += [stub(args.library, name, code) for name in names]
    exports = sorted(set(names) | set(extra))
    body = "\n".join("    %s;" % name for name in exports) if exports else "    simcuda_no_exports_;"
    version_script = "%s{\n  global:\n%s\n  local: *;\n};\n" % ((node + " ") if node else "", body)
    for path, text in ((args.out_c, "\n".join(c)), (args.out_map, version_script)):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)


if __name__ == "__main__":
    main()
