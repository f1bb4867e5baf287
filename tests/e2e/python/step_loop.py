#!/usr/bin/env python3
"""A Python decode loop with tokprof step markers, for test_api.py: each iteration is one
`with tokprof.step():` around a cuBLAS GEMM (ctypes into the CUDA runtime and cuBLAS, the
simulated GPU's in CI) and a device synchronisation. Run under the shim with
TOKPROF_STEP=marker, the capture must have exactly one token step per iteration.

usage: step_loop.py ITERATIONS [--time]   (--time: then times 20,000 empty step_begin+step_end
pairs — steps too, so not in a run whose steps are counted)
"""
import ctypes
import sys
import time

import tokprof

n = int(sys.argv[1])
rt = ctypes.CDLL("libcudart.so.13")
blas = ctypes.CDLL("libcublas.so.13")
ptrs = [ctypes.c_void_p() for _ in range(3)]
for p in ptrs:
    assert rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0
h = ctypes.c_void_p()
assert blas.cublasCreate_v2(ctypes.byref(h)) == 0
one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
for _ in range(n):
    with tokprof.step():
        # C = A^T B: m=256 (weights), n=1 (one token), k=256
        assert blas.cublasSgemm_v2(h, 1, 0, 256, 1, 256, ctypes.byref(one), ptrs[0], 256,
                                   ptrs[1], 256, ctypes.byref(zero), ptrs[2], 256) == 0
        assert rt.cudaDeviceSynchronize() == 0
blas.cublasDestroy_v2(h)

print(f"step_loop: {n} steps")
if sys.argv[2:] != ["--time"]:
    sys.exit(0)
reps = 20000
t0 = time.perf_counter()
for _ in range(reps):
    tokprof.step_begin()
    tokprof.step_end()
dt = (time.perf_counter() - t0) / reps
print(f"step_loop: step_begin+step_end {dt * 1e9:.0f} ns per pair "
      f"({'shim' if tokprof.step_begin is not tokprof._noop else 'no shim'})")
