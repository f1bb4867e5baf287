#!/usr/bin/env python3
"""Runs libs_smoke on the simulated GPU and checks the library kernels in the truth log:
names (families), order, via "library", all on the same non-default stream, shape-derived grids."""
import json
import os
import re
import subprocess
import sys

exe, simgpu, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
tlog = os.path.join(work, "truth.jsonl")
if os.path.exists(tlog):
    os.unlink(tlog)
env = dict(os.environ, LD_LIBRARY_PATH=simgpu, SIMGPU_LOG=tlog)
p = subprocess.run([exe], env=env)
if p.returncode:
    sys.exit("libs_smoke failed")
recs = sorted((json.loads(l) for l in open(tlog)), key=lambda r: r["seq"])
k = [r for r in recs if r["kind"] == "kernel"]
want = [
    (r"^_Z17gemv2T_kernel_val", [16, 1, 1]),
    (r"^nvjet_tst_128x8_64x8_2x1_v_bz_TNT$", [4, 1, 1]),
    (r"^nvjet_tst_128x8_.*_splitK_TNT$", [2, 1, 4]),
    (r"^_Z19splitKreduce_kernel", None),
    (r"^sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1", [4, 2, 1]),
    (r"^sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_", [16, 1, 1]),
    (r"^sm90_xmma_fprop_implicit_gemm_", None),
]
errors = []
if len(k) != len(want):
    errors.append(f"{len(k)} kernels, expected {len(want)}: {[r['name'] for r in k]}")
for r, (pat, grid) in zip(k, want):
    if not re.search(pat, r["name"]):
        errors.append(f"seq {r['seq']}: {r['name']} does not match {pat}")
    if grid and r["grid"] != grid:
        errors.append(f"seq {r['seq']}: {r['name']} grid {r['grid']}, expected {grid}")
    if r["via"] != "library":
        errors.append(f"seq {r['seq']}: via {r['via']}")
if len({r["stream"] for r in k}) != 1 or (k and k[0]["stream"] == 0):
    errors.append(f"streams {[r['stream'] for r in k]}: expected one non-default stream")
if k and not k[1]["flops"] == 2 * 512 * 8 * 256:
    errors.append(f"flops of the GemmEx kernel {k[1]['flops']}, expected {2 * 512 * 8 * 256}")
for e in errors:
    print("MISMATCH", e)
print("FAIL" if errors else f"OK: {len(k)} library kernels")
sys.exit(1 if errors else 0)
