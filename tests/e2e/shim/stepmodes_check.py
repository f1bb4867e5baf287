#!/usr/bin/env python3
"""Runs tests/e2e/shim/stepmodes under the shim on simgpu with one TOKPROF_STEP mode and checks that
the capture has exactly N token steps of K+1 launches each (or none, for `auto`).

usage: stepmodes_check.py PROGRAM SHIM TOKPROF SIMGPU_DIR WORKDIR MODE N K EXPECT_STEPS [core|domain]
(domain: the program's NVTX ranges use the domain API and a registered string)"""
import glob, json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

prog, shim, tokprof, sim, work, mode, n, k, expect = sys.argv[1:10]
n, k, expect = int(n), int(k), int(expect)
api = sys.argv[10] if len(sys.argv) > 10 else "core"
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ, LD_LIBRARY_PATH=sim, LD_PRELOAD=shim_preload(shim), TOKPROF_OUT=work,
           TOKPROF_STEP=mode, NVTX_INJECTION64_PATH=shim)
p = subprocess.run([prog, str(n), str(k), api], env=env, capture_output=True, text=True, timeout=60)
if p.returncode != 0 or p.stderr:
    print(f"FAIL: program exit {p.returncode}, stderr {p.stderr!r}")
    sys.exit(1)
caps = glob.glob(os.path.join(work, "*.tokprof"))
dump = subprocess.run([tokprof, "dump", caps[0]], capture_output=True, text=True, check=True).stdout
recs = [json.loads(l) for l in dump.splitlines()]
per_seg = {}
for r in recs:
    if r["type"] == "launch":
        per_seg[r["step"]] = per_seg.get(r["step"], 0) + 1
steps = [r for r in recs if r["type"] == "step" and r["kind"] == "token"]
got = [per_seg.get(s["step"], 0) for s in steps]
want = [k + 1] * expect
nvtx = sum(1 for r in recs if r["type"] == "nvtx")
print(f"mode {mode}: token steps {len(steps)} with launches {got}; nvtx records {nvtx}")
if got != want:
    print(f"FAIL: wanted {want}")
    sys.exit(1)
if mode.startswith("nvtx") and nvtx != 2 * n:
    print(f"FAIL: wanted {2 * n} nvtx records")
    sys.exit(1)
