#!/usr/bin/env python3
"""Runs an nvcc-built rt_prog on the simulated GPU and checks it.

usage: check_rtprog.py PROG plain|legacy|ptsz TRUTH_PY

1. its dynamic imports (nm -D -u) are the ones that build mode produces;
2. it runs (LD_LIBRARY_PATH from the environment points at build/tests/simgpu) and prints OK;
3. its truth log (SIMGPU_LOG) has the expected records in order: names, kinds, streams, via;
4. truth.py check accepts the log (durations equal the cost model, per-stream FIFO holds).
"""
import json
import os
import subprocess
import sys
import tempfile

prog, mode, truth = sys.argv[1], sys.argv[2], sys.argv[3]
fail = []

nm = subprocess.run(["nm", "-D", "-u", prog], capture_output=True, text=True, check=True).stdout
imports = {line.split()[-1].split("@")[0] for line in nm.splitlines() if line.strip()}
want = {"plain": ["__cudaLaunchKernel", "__cudaGetKernel", "cudaMemcpy"],
        "legacy": ["cudaLaunchKernel", "cudaMemcpy"],
        "ptsz": ["__cudaLaunchKernel_ptsz", "cudaMemcpy_ptds", "cudaMemset_ptds",
                 "cudaStreamSynchronize_ptsz", "cudaEventRecord_ptsz",
                 "cudaStreamBeginCapture_ptsz", "cudaGetDriverEntryPointByVersion_ptsz"]}[mode]
for sym in want:
    if sym not in imports:
        fail.append(f"{prog} does not import {sym}")
if mode == "legacy" and "__cudaLaunchKernel" in imports:
    fail.append("legacy build imports __cudaLaunchKernel")

with tempfile.TemporaryDirectory() as tmp:
    log = os.path.join(tmp, "truth.jsonl")
    env = dict(os.environ, SIMGPU_LOG=log, LD_BIND_NOW="1")  # every import must resolve
    env.pop("SIMGPU_COST", None)
    r = subprocess.run([prog], env=env, capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0 or "OK" not in r.stdout:
        fail.append(f"{prog} exited {r.returncode}")
    recs = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
    scale, norm = "_Z12scale_kernelPffi", "_Z14rmsnorm_kernelPfi"
    # default-stream work: legacy stream 0, or the per-thread stream (created first, id 1)
    dflt = 1 if mode == "ptsz" else 0
    s = 2 if mode == "ptsz" else 1
    expect = [("copy", "memcpy", dflt, "runtime"), ("kernel", scale, dflt, "runtime"),
              ("kernel", norm, s, "runtime"), ("kernel", scale, s, "runtime"),
              ("kernel", scale, s, "graph"), ("kernel", norm, s, "graph"),
              ("kernel", scale, s, "graph"), ("kernel", norm, s, "graph"),
              ("copy", "memcpy", dflt, "runtime"), ("memset", "memset", dflt, "runtime")]
    got = [(x["kind"], x["name"], x["stream"], x["via"]) for x in recs]
    if got != expect:
        fail.append("truth log mismatch:\n  got    %s\n  expect %s" % (got, expect))
    if recs and recs[1]["grid"] != [4, 1, 1]:
        fail.append(f"grid {recs[1]['grid']}")
    if recs and recs[1]["handle"] != "0x0":
        fail.append(f"handle {recs[1]['handle']}")
    if len(recs) >= 8 and recs[4]["graph_node"] != recs[6]["graph_node"]:
        fail.append("graph node ids differ between replays")
    c = subprocess.run([sys.executable, truth, "check", log], capture_output=True, text=True)
    sys.stdout.write(c.stdout)
    if c.returncode != 0:
        fail.append("truth.py check failed: " + c.stdout + c.stderr)

for f in fail:
    print("FAIL:", f)
print("PASS" if not fail else "FAILED")
sys.exit(1 if fail else 0)
