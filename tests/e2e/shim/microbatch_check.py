#!/usr/bin/env python3
"""Runs tests/e2e/shim/microbatch (a decode loop with synchronous uploads on the per-thread
stream) under the shim on simgpu with TOKPROF_STEP=auto and checks: one token step per
evaluation, one part step per evaluation split into micro-batches (the part ends where its token
step ends: one wait), every step closed by the compute stream's sync (never by the per-thread
stream's), summary's counts, and tokens per step from the kernels' names (mul_mat_vec_q<type, N>:
4 a whole evaluation, 3 + 2 a split one, counted in its token step).

With `sync` (the host also waits for the compute stream between the micro-batches, as ggml's
scheduler does) each part ends at its own wait, before its token step's.

usage: microbatch_check.py PROGRAM SHIM TOKPROF SIMGPU_DIR WORKDIR N K [sync]"""
import glob, json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

prog, shim, tokprof, sim, work, n, k = sys.argv[1:8]
n, k = int(n), int(k)
mode = sys.argv[8] if len(sys.argv) > 8 else "once"
splits = sum(1 for e in range(n) if e % 3 == 2)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ, LD_LIBRARY_PATH=sim, LD_PRELOAD=shim_preload(shim), TOKPROF_OUT=work,
           TOKPROF_STEP="auto")
p = subprocess.run([prog, str(n), str(k), mode], env=env, capture_output=True, text=True, timeout=60)
if p.returncode != 0 or p.stderr:
    print(f"FAIL: program exit {p.returncode}, stderr {p.stderr!r}")
    sys.exit(1)
cap = glob.glob(os.path.join(work, "*.tokprof"))[0]
dump = subprocess.run([tokprof, "dump", cap], capture_output=True, text=True, check=True).stdout
steps = [json.loads(l) for l in dump.splitlines() if json.loads(l)["type"] == "step"]
kinds = [s["kind"] for s in steps]
print(f"steps: {kinds}")
errors = []
want = []
for e in range(n):
    want += ["part", "token"] if e % 3 == 2 else ["token"]
if kinds != want:
    errors.append(f"step kinds {kinds}, wanted {want}")
for a, b in zip(steps, steps[1:]):
    if a["kind"] == "part" and (a["end_ns"] >= b["end_ns"] if mode == "sync" else
                                a["end_ns"] != b["end_ns"]):
        errors.append(f"part step {a['step']} ends at {a['end_ns']}, its token step at {b['end_ns']}")
if any(s["closed_by"] != "stream_sync" for s in steps):
    errors.append(f"closed by {[s['closed_by'] for s in steps]}")
sm = json.loads(subprocess.run([tokprof, "summary", "--json", cap], capture_output=True, text=True,
                               check=True).stdout)
if (sm["steps"], sm["part_steps"]) != (n, splits):
    errors.append(f"summary: {sm['steps']} token steps, {sm['part_steps']} part, wanted {n}, {splits}")
if (sm["tokens"], sm.get("tokens_unknown_steps")) != (4 * (n - splits) + 5 * splits, None):
    errors.append(f"summary: tokens {sm['tokens']}, unknown {sm.get('tokens_unknown_steps')}")
st = json.loads(subprocess.run([tokprof, "steps", "--json", cap], capture_output=True, text=True,
                               check=True).stdout)["steps"]
if [s["kind"] for s in st] != want:
    errors.append(f"tokprof steps kinds {[s['kind'] for s in st]}")
toks = [(s["tokens"], s["tokens_source"]) for s in st if s["kind"] == "token"]
if toks != [(5 if e % 3 == 2 else 4, "kernels") for e in range(n)]:
    errors.append(f"tokens per token step {toks}")
if errors:
    print("FAIL:\n" + "\n".join(errors))
    sys.exit(1)
print(f"ok: {n} token steps, {splits} part steps")
