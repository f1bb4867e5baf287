#!/usr/bin/env python3
"""Generates the "unimplemented" stubs of one fake library from the CUDA 13 headers.

    gen_stubs.py LIB CC INCLUDE_DIR OUT.c [OUT.names]

Every function the library's public headers declare gets a weak definition that returns the
library's "not supported" status through simgpu_unimpl() (tests/simgpu/unimpl.c): one line
`simgpu: unimplemented NAME` on stderr per name, one line per call in $SIMGPU_UNIMPL_LOG. A
function the fake implements is a strong definition in another object of the same library and
wins at link time, so the fakes export the complete public API without listing what they
simulate. Declarations are read from the preprocessed headers (`CC -E`), once per macro variant
that changes the exported names (cuda.h's per-thread-stream and versioned names).

For the driver the output also holds simgpu_all_procs[] (every exported name with its address)
and simgpu_base_procs[] (base name -> default and per-thread versioned names, from cuda.h's
#defines), which cuGetProcAddress falls back on for names its hand-written table lacks."""
import os
import re
import subprocess
import sys

# lib: headers, name prefix, excluded prefix, status type, "not supported" value, macro variants
LIBS = {
    "cuda": (["cuda.h", "cudaProfiler.h"], r"cu[A-Z]", None, "CUresult", "801",
             [[], ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"], ["-D__CUDA_API_VERSION_INTERNAL"]]),
    "cudart": (["cuda_runtime_api.h", "cuda_profiler_api.h"], r"cuda[A-Z]", None, "cudaError_t", "801",
               [[], ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"]]),
    "cublas": (["cublas.h", "cublas_api.h", "cublasXt.h"], r"cublas", r"cublasLt", "cublasStatus_t", "15",
               [[]]),
    "cublasLt": (["cublasLt.h"], r"cublasLt", None, "cublasStatus_t", "15", [[]]),
    "cudnn": (["cudnn.h"], r"cudnn", None, "cudnnStatus_t", "3000", [[]]),
    "cupti": (["cupti.h", "cupti_pcsampling.h", "cupti_profiler_target.h",
               "cupti_checkpoint.h", "cupti_pmsampling.h", "cupti_range_profiler.h",
               "cupti_sass_metrics.h"], r"cupti", None, "CUptiResult", "27", [[]]),
    # NVML's header is not in the CUDA toolkit: its names come from nvml/nvml.names (every function
    # nvidia-ml-py's pynvml.py calls); all return nvmlReturn_t but nvmlErrorString (nvml.c has it).
    "nvml": (None, r"nvml", None, "nvmlReturn_t", "3", [[]]),
}
NAMES_FILE = {"nvml": os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvml", "nvml.names")}

# Names real clients import that no public header declares: the runtime's registration ABI
# (crt/host_runtime.h; nvcc-built code calls it), and a cuBLAS export cuSOLVER imports.
EXTRA = {"cudart": ["__cudaRegisterFatBinary", "__cudaRegisterFatBinaryEnd", "__cudaUnregisterFatBinary",
                "__cudaRegisterFunction", "__cudaRegisterVar", "__cudaRegisterManagedVar",
                "__cudaRegisterHostVar", "__cudaRegisterUnifiedTable", "__cudaInitModule",
                "__cudaPushCallConfiguration", "__cudaPopCallConfiguration", "__cudaGetKernel",
                "__cudaLaunchKernel", "__cudaLaunchKernel_ptsz", "__cudaGetProcAddress"],
         # exported by the real libcublas.so.13 without a header; cuSOLVER imports it
         "cublas": ["cublasSetEnvironmentMode"],
         # the unversioned and older names nvml.h still exports (pynvml reaches the newest ones)
         "nvml": ["nvmlInit", "nvmlInit_v2", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
                  "nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetHandleByPciBusId"]}


# Declared by the headers but exported by no real library (13.0 toolkit, 13.4 wheel): left out so
# the fakes export nothing the real libraries lack (tests/e2e/check_libs_soname.sh).
NOT_EXPORTED = {"cublasLtDisableCpuInstructionsSetMask"}


def preprocess(cc, inc, headers, flags, macros=False):
    """Each header on its own (cublas.h and cublas_api.h may not be included together)."""
    out = []
    for h in headers:
        cmd = [cc, "-E", "-P", "-x", "c", "-I", inc] + flags + (["-dM"] if macros else []) + ["-"]
        out.append(subprocess.run(cmd, input=f"#include <{h}>\n", capture_output=True, text=True,
                                  check=True).stdout)
    return "\n".join(out)


def strip_attributes(text):
    out, i = [], 0
    while True:
        j = text.find("__attribute__", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = text.index("(", j)
        depth = 0
        while True:
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        i = k


def declarations(text, prefix, exclude):
    """Top-level function declarations: yields (return type, name)."""
    text = strip_attributes(text)
    text = re.sub(r"\b(extern|__inline__|inline|static)\b", " ", text)
    depth, start = 0, 0
    stmts = []
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                stmts.append(text[start:i] + "{")
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif ch == ";" and depth == 0:
            stmts.append(text[start:i])
            start = i + 1
    for s in stmts:
        s = " ".join(s.split())
        if s.startswith("typedef") or s.endswith("{"):
            continue
        m = re.match(r"^([^()]*?)\b([A-Za-z_]\w*)\s*\(", s)
        if not m:
            continue
        rtype, name = m.group(1).strip(), m.group(2)
        if not re.match(prefix, name) or (exclude and re.match(exclude, name)):
            continue
        if not rtype:
            continue
        yield rtype, name


def main():
    lib, cc, inc, out = sys.argv[1:5]
    names_out = sys.argv[5] if len(sys.argv) > 5 else None
    headers, prefix, exclude, status, notsup, variants = LIBS[lib]
    funcs = {}
    if lib in NAMES_FILE:
        with open(NAMES_FILE[lib]) as f:
            for line in f:
                name = line.split("#")[0].strip()
                if name:
                    funcs[name] = "const char *" if name.endswith("ErrorString") else status
    for flags in variants if headers else []:
        for rtype, name in declarations(preprocess(cc, inc, headers, flags), prefix, exclude):
            if name not in NOT_EXPORTED:
                funcs.setdefault(name, rtype)
    for n in EXTRA.get(lib, []):
        funcs.setdefault(n, status)
    source = ", ".join(headers) if headers else os.path.basename(NAMES_FILE[lib])
    lines = [f"/* Generated by tests/simgpu/gen_stubs.py from {source}: do not edit. */",
             "#include <stddef.h>", '#include "unimpl.h"', ""]
    for name in sorted(funcs):
        rtype = funcs[name]
        if rtype.replace("const ", "") in (status, "enum " + status) or rtype == "int" and status == "int":
            ret = f"return simgpu_unimpl(\"{name}\", &seen, {notsup});"
            ctype = "int"
        elif rtype == "void":
            ret = f"simgpu_unimpl(\"{name}\", &seen, 0);"
            ctype = "void"
        elif rtype.startswith("struct "):
            continue  # returned through memory: the fake must implement it (cudaCreateChannelDesc)
        elif rtype in ("float", "double", "cuComplex", "cuDoubleComplex"):
            ret = f"simgpu_unimpl(\"{name}\", &seen, 0); return 0.0;"
            ctype = "double"
        elif "*" in rtype:
            ret = f"simgpu_unimpl(\"{name}\", &seen, 0); return (void *)simgpu_unimpl_string;"
            ctype = "void *"
        else:
            ret = f"simgpu_unimpl(\"{name}\", &seen, 0); return 0;"
            ctype = "long"
        lines.append(f"SIMGPU_STUB {ctype} {name}(void);")
        lines.append(f"SIMGPU_STUB {ctype} {name}(void) {{ static int seen; {ret} }}")
    if lib == "cuda":
        lines += ["", "const struct simgpu_named_proc simgpu_all_procs[] = {"]
        lines += [f"    {{\"{n}\", (void *){n}}}," for n in sorted(funcs)]
        lines += ["    {NULL, NULL}", "};", ""]
        plain = base_macros(preprocess(cc, inc, headers, [], macros=True))
        ptds = base_macros(preprocess(cc, inc, headers, ["-DCUDA_API_PER_THREAD_DEFAULT_STREAM"], macros=True))
        lines.append("const struct simgpu_base_proc simgpu_base_procs[] = {")
        for base in sorted(set(plain) | set(ptds)):
            p, t = plain.get(base, base), ptds.get(base, plain.get(base, base))
            if p in funcs or t in funcs:
                p = p if p in funcs else t
                t = t if t in funcs else p
                lines.append(f"    {{\"{base}\", \"{p}\", \"{t}\"}},")
        lines += ["    {NULL, NULL, NULL}", "};"]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    if names_out:
        with open(names_out, "w") as f:
            f.write("".join(n + "\n" for n in sorted(funcs)))


def base_macros(macros):
    """cuda.h's `#define cuX cuX_v2` and `#define cuX __CUDA_API_PTDS(cuX_v2)`: base -> exported."""
    out = {}
    for m in re.finditer(r"^#define (cu[A-Z]\w*) +(?:__CUDA_API_PT(?:DS|SZ)\((\w+)\)|(cu[A-Z]\w*))\s*$",
                         macros, re.M):
        base, inner, plain = m.group(1), m.group(2), m.group(3)
        if inner:
            pt = re.search(r"__CUDA_API_PT(DS|SZ)", m.group(0)).group(1).lower()
            out[base] = (inner, pt)
        else:
            out[base] = (plain, None)
    # __CUDA_API_PTDS expands to api##_ptds when CUDA_API_PER_THREAD_DEFAULT_STREAM is set.
    ptd = "#define __CUDA_API_PER_THREAD_DEFAULT_STREAM" in macros
    return {b: (n + "_" + pt if ptd and pt else n) for b, (n, pt) in out.items()}


if __name__ == "__main__":
    main()
