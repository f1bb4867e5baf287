#!/usr/bin/env python3
"""An unimplemented call is reported, not crashed on: one function of each fake that is only a
generated stub answers its library's "not supported" status, names itself once on stderr however
often it is called, and once per call in $SIMGPU_UNIMPL_LOG; cuGetProcAddress resolves an
unsimulated driver name to its stub too.

    check_unimpl.py FAKE_DIR"""
import ctypes
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import asan_host  # noqa: E402  (tests/preload.py)


# library, a function the fake does not simulate, its library's "not supported" status
CALLS = [("libcuda.so.1", "cuGraphicsUnregisterResource", 801),
         ("libcudart.so.13", "cudaGraphicsUnregisterResource", 801),
         ("libcublas.so.13", "cublasSrotg_v2", 15),
         ("libcublasLt.so.13", "cublasLtLoggerSetFile", 15),
         ("libcudnn.so.9", "cudnnCreateDropoutDescriptor", 3000),
         ("libcupti.so.13", "cuptiGetContextId", 27)]


def child(fake_dir):
    out = []
    for lib, fn, _ in CALLS:
        f = getattr(ctypes.CDLL(os.path.join(fake_dir, lib)), fn)
        out.append(f"{fn}={f()},{f()}")
    cuda = ctypes.CDLL(os.path.join(fake_dir, "libcuda.so.1"))
    pfn, st = ctypes.c_void_p(), ctypes.c_int(-1)
    r = cuda.cuGetProcAddress_v2(b"cuGraphicsUnregisterResource", ctypes.byref(pfn), 13000, 0, ctypes.byref(st))
    stub = ctypes.CFUNCTYPE(ctypes.c_int)(pfn.value) if pfn.value else None
    out.append(f"gpa={r},{st.value},{stub() if stub else None}")
    print(" ".join(out))


def main():
    fake_dir = sys.argv[1]
    if len(sys.argv) > 2:
        child(fake_dir)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "unimpl.log")
        env = dict(os.environ, SIMGPU_UNIMPL_LOG=log, LD_LIBRARY_PATH=fake_dir)
        env = asan_host(env)
        p = subprocess.run([sys.executable, __file__, fake_dir, "child"], env=env, capture_output=True, text=True)
        lines = open(log).read().split() if os.path.exists(log) else []
    ok = p.returncode == 0
    want = " ".join(f"{fn}={st},{st}" for _, fn, st in CALLS) + " gpa=0,0,801"
    if p.stdout.strip() != want:
        print(f"answers: {p.stdout.strip()!r}\nwanted:  {want!r}")
        ok = False
    expect_err = [f"simgpu: unimplemented {fn}" for _, fn, _ in CALLS]
    err = [l for l in p.stderr.splitlines() if l.startswith("simgpu:")]
    if err != expect_err:
        print("stderr:", p.stderr)
        ok = False
    names = lines[1::2]
    for _, fn, _ in CALLS:
        want_n = 3 if fn == "cuGraphicsUnregisterResource" else 2
        if names.count(fn) != want_n:
            print(f"log: {fn} {names.count(fn)} times, wanted {want_n}")
            ok = False
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
