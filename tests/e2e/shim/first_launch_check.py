#!/usr/bin/env python3
"""64 threads' first launches at once under TOKPROF_STEP=kernel:RE or nvtx:RE (first_launch.c).

usage: first_launch_check.py PROGRAM SHIM TOKPROF SIMGPU_DIR WORKDIR MODE THREADS STEPS

The program must exit 0 with nothing on stderr: in the ThreadSanitizer build (TOKPROF_TSAN, where
ctest sets TSAN_OPTIONS with exitcode=66) a data race in the shim is a report on stderr and exit
66 — issue 33's race, where the step detector compiled its regex lazily on whichever application
threads reached their first launch together. Then the capture must hold THREADS x STEPS token
steps of 3 launches each: each thread found every one of its steps."""
import glob, json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

prog, shim, tokprof, sim, work, mode = sys.argv[1:7]
threads, steps = int(sys.argv[7]), int(sys.argv[8])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ, LD_LIBRARY_PATH=sim, LD_PRELOAD=shim_preload(shim), TOKPROF_OUT=work,
           TOKPROF_STEP=mode, NVTX_INJECTION64_PATH=shim, TOKPROF_GPU="off", SIMGPU_ZERO="1",
           TOKPROF_RING_KB="256")
args = [prog, str(threads), str(steps)] + (["nvtx"] if mode.startswith("nvtx:") else [])
p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240)
if p.returncode != 0 or p.stderr:
    print(f"FAIL: {mode}: program exit {p.returncode}, stderr:\n{p.stderr[-6000:]}")
    sys.exit(1)
caps = glob.glob(os.path.join(work, "*.tokprof"))
if len(caps) != 1:
    print(f"FAIL: want one capture, got {caps}")
    sys.exit(1)
dump = subprocess.run([tokprof, "dump", caps[0]], capture_output=True, text=True, check=True).stdout
recs = [json.loads(line) for line in dump.splitlines()]
per_seg = {}
for r in recs:
    if r["type"] == "launch":
        key = (r["tid"], r["step"])
        per_seg[key] = per_seg.get(key, 0) + 1
tokens = [r for r in recs if r["type"] == "step" and r["kind"] == "token"]
sizes = sorted({per_seg.get((r["tid"], r["step"]), 0) for r in tokens})
by_thread = {}
for r in tokens:
    by_thread[r["tid"]] = by_thread.get(r["tid"], 0) + 1
print(f"{mode}: {threads} threads, {len(tokens)} token steps on {len(by_thread)} threads, "
      f"launches per step {sizes}")
if len(tokens) != threads * steps or sizes != [3] or sorted(set(by_thread.values())) != [steps]:
    print(f"FAIL: want {threads * steps} token steps ({steps} on each of {threads} threads) of "
          f"3 launches each")
    sys.exit(1)
