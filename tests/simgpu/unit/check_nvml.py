#!/usr/bin/env python3
"""The fake libnvidia-ml.so.1 answers what vLLM's platform detection asks (count, name, memory,
compute capability, UUID) with the fake driver's own facts, and an NVML function it does not
simulate answers NVML_ERROR_NOT_SUPPORTED (3) and names itself, in a fresh process.

    check_nvml.py FAKE_DIR"""
import ctypes
import os
import subprocess
import sys

CHILD = r"""
import ctypes, os, sys
d = sys.argv[1]
nvml = ctypes.CDLL(os.path.join(d, "libnvidia-ml.so.1"))
cuda = ctypes.CDLL(os.path.join(d, "libcuda.so.1"))
n = ctypes.c_uint(7)
assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 1, "count before init must be UNINITIALIZED"
assert nvml.nvmlInitWithFlags(0) == 0
assert nvml.nvmlInit_v2() == 0
assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 0 and n.value == 1, n.value
h = ctypes.c_void_p()
assert nvml.nvmlDeviceGetHandleByIndex_v2(1, ctypes.byref(h)) == 2
assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0 and h.value
name, drv_name = ctypes.create_string_buffer(96), ctypes.create_string_buffer(96)
assert nvml.nvmlDeviceGetName(h, name, 96) == 0
assert cuda.cuDeviceGetName(drv_name, 96, 0) == 0
assert name.value == drv_name.value, (name.value, drv_name.value)
assert nvml.nvmlDeviceGetName(h, name, 4) == 7, "short buffer must be INSUFFICIENT_SIZE"
class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
m = Mem()
assert nvml.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) == 0
assert (m.total, m.free, m.used) == (3 << 30, 3 << 30, 0), (m.total, m.free, m.used)
ma, mi = ctypes.c_int(), ctypes.c_int()
assert nvml.nvmlDeviceGetCudaComputeCapability(h, ctypes.byref(ma), ctypes.byref(mi)) == 0
assert (ma.value, mi.value) == (9, 0), (ma.value, mi.value)
uuid = ctypes.create_string_buffer(96)
assert nvml.nvmlDeviceGetUUID(h, uuid, 96) == 0 and uuid.value.startswith(b"GPU-"), uuid.value
h2 = ctypes.c_void_p()
assert nvml.nvmlDeviceGetHandleByUUID(uuid, ctypes.byref(h2)) == 0 and h2.value == h.value
clock = ctypes.c_uint()
assert nvml.nvmlDeviceGetClockInfo(h, 0, ctypes.byref(clock)) == 3, "unsimulated must be NOT_SUPPORTED"
nvml.nvmlErrorString.restype = ctypes.c_char_p
assert nvml.nvmlErrorString(3) == b"Not Supported"
assert nvml.nvmlShutdown() == 0 and nvml.nvmlShutdown() == 0 and nvml.nvmlShutdown() == 1
print("ok")
"""


def main():
    d = os.path.abspath(sys.argv[1])
    log = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"nvml-unimpl.{os.getpid()}.log")
    env = dict(os.environ, SIMGPU_MEM="3G", SIMGPU_UNIMPL_LOG=log, LD_LIBRARY_PATH=d)
    # the sanitizer build's fakes are instrumented: python must load the ASan runtime first
    # (tests/preload.py), and CPython's heap at exit is not ours to leak-check
    asan = os.environ.get("TOKPROF_TEST_PRELOAD_PREFIX")
    if asan:
        env.update(LD_PRELOAD=asan, ASAN_OPTIONS=env.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    p = subprocess.run([sys.executable, "-c", CHILD, d], env=env, capture_output=True, text=True)
    try:
        with open(log) as f:
            logged = f.read().split()
        os.unlink(log)
    except OSError:
        logged = []
    if p.returncode != 0 or p.stdout.strip() != "ok":
        print(f"FAIL: exit {p.returncode}\n{p.stdout}{p.stderr}")
        return 1
    if "simgpu: unimplemented nvmlDeviceGetClockInfo" not in p.stderr or "nvmlDeviceGetClockInfo" not in logged:
        print(f"FAIL: the unsimulated call did not name itself: stderr {p.stderr!r}, log {logged}")
        return 1
    print("ok: nvml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
