#!/usr/bin/env python3
"""One truth log per process (README.md, "Truth log"): a process that executes nothing leaves no
file and truncates none; "%p" in SIMGPU_LOG gives each process its own; every line has "pid".

    check_truthlog.py FAKE_DIR"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import asan_host  # noqa: E402  (tests/preload.py)


def child(fake_dir, launch):
    cu = ctypes.CDLL(os.path.join(fake_dir, "libcuda.so.1"))
    assert cu.cuInit(0) == 0
    if launch:
        ctx, mod, fn = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
        assert cu.cuModuleLoadData(ctypes.byref(mod), b"image") == 0
        assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"one_kernel") == 0
        assert cu.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None) == 0
        assert cu.cuCtxSynchronize() == 0


def spawn(fake_dir, log, launch):
    env = dict(os.environ, SIMGPU_LOG=log)
    env = asan_host(env)
    p = subprocess.run([sys.executable, __file__, fake_dir, "launch" if launch else "idle"], env=env)
    assert p.returncode == 0
    return p


def main():
    fake_dir = os.path.abspath(sys.argv[1])
    if len(sys.argv) > 2:
        child(fake_dir, sys.argv[2] == "launch")
        return 0
    errors = []
    with tempfile.TemporaryDirectory() as d:
        plain = os.path.join(d, "truth.jsonl")
        spawn(fake_dir, plain, False)
        if os.path.exists(plain):
            errors.append("a process that executed nothing left a truth log")
        spawn(fake_dir, plain, True)
        spawn(fake_dir, plain, False)  # a compiler worker: must not truncate the log
        lines = open(plain).read().splitlines() if os.path.exists(plain) else []
        if len(lines) != 1 or "pid" not in json.loads(lines[0]):
            errors.append(f"after a launching and an idle process: {lines}")
        per = os.path.join(d, "t.%p.jsonl")
        spawn(fake_dir, per, True)
        spawn(fake_dir, per, True)
        files = sorted(f for f in os.listdir(d) if f.startswith("t."))
        if len(files) != 2:
            errors.append(f"two launching processes with %p: files {files}")
        for f in files:
            recs = [json.loads(l) for l in open(os.path.join(d, f))]
            if len(recs) != 1 or str(recs[0]["pid"]) != f.split(".")[1]:
                errors.append(f"{f}: {recs}")
    print("FAIL:\n" + "\n".join(errors) if errors else "ok: one truth log per process")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
