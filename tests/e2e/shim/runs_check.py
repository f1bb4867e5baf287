#!/usr/bin/env python3
"""Runs end to end (docs/FORMAT.md, "Runs"): minillm on simgpu, captured by the shim in format 3
with sampled stacks off and on (format 5 since REP records) (a launch with a stack is a record of its own and ends the open
run). What the reader delivers must agree with what the shim counted at capture time and with the
other capture:
- per thread and step, the launch records equal the STEP record's `launches` (the step detector's
  count, made before any encoding);
- per thread, library call ids run 1, 2, 3, ... and every launch's `call` names a library call of
  its thread and step;
- the two captures hold the same per-thread sequences of launches and calls (type, step, name,
  grid, block, call, shape), stacks aside; the sampled one has launches with stacks;
- times (format 4: a step's RUN that repeats the previous step's launches holds its times as
  differences against that RUN's): per thread the launches' times never go back, and each lies
  within its STEP's begin_ns .. mark_ns (times the shim wrote as absolute fields).

usage: runs_check.py BUILD_DIR WORKDIR"""
import json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import capture_one, format_version  # noqa: E402  (tests/preload.py)

build, work = sys.argv[1:3]
fails = []


def capture(name, stacks):
    cap = capture_one(build, os.path.join(work, name),
                      [os.path.join(build, "kernels/minillm"), "--style", "hf", "--steps", "40",
                       "--layers", "2", "--threads", "2"],
                      dict(SIMGPU_ZERO="1", TOKPROF_GPU="off", TOKPROF_STACKS=stacks,
                           TOKPROF_RING_KB="8192", TOKPROF_FLUSH_MS="20"), timeout=120)
    version = format_version(cap)
    if version != 6:
        fails.append(f"{name}: format version {version}, expected 6")
    d = subprocess.run([os.path.join(build, "decoder/tokprof"), "dump", cap],
                       capture_output=True, text=True, timeout=120)
    if d.returncode:
        sys.exit(f"FAIL: tokprof dump {name}: exit {d.returncode}: {d.stderr}")
    return [json.loads(line) for line in d.stdout.splitlines()]


def check(name, recs):
    """The capture's own counts; returns its per-thread sequences, sorted, and stacked launches."""
    launches, counted, calls, seqs, stacked = {}, {}, {}, {}, 0
    bounds, last, times = {}, {}, []
    for r in recs:
        if r["type"] == "step":
            bounds[(r["tid"], r["step"])] = (r["begin_ns"], r["mark_ns"])
    for r in recs:
        t = r["type"]
        if t == "loss":
            fails.append(f"{name}: the shim dropped records ({r})")
        if t == "step":
            counted[(r["tid"], r["step"])] = r["launches"]
        if t not in ("launch", "lib_call"):
            continue
        tid, step = r["tid"], r["step"]
        if t == "launch":
            launches[(tid, step)] = launches.get((tid, step), 0) + 1
            ns = r["host_ns"]
            if ns < last.get(tid, 0):
                times.append(f"thread {tid} step {step}: a launch at {ns} after {last[tid]}")
            last[tid] = ns
            b = bounds.get((tid, step))
            if b and not b[0] <= ns <= b[1]:
                times.append(f"thread {tid} step {step}: a launch at {ns} outside {b}")
            stacked += "stack" in r
            key = (t, step, r["name"], tuple(r["grid"]), tuple(r["block"]), r.get("call", 0))
        else:
            ids = calls.setdefault(tid, [])
            if r["call"] != len(ids) + 1:
                fails.append(f"{name}: thread {tid}: call {r['call']} after {len(ids)} calls")
            ids.append((r["call"], step))
            key = (t, step, r["op"], r["m"], r["n"], r["k"], r["call"])
        seqs.setdefault(tid, []).append(key)
    if launches != counted:
        bad = sorted(k for k in set(launches) | set(counted) if launches.get(k) != counted.get(k))
        fails.append(f"{name}: launch records per (tid, step) differ from STEP counts at {bad[:5]}"
                     f" (delivered {[launches.get(k) for k in bad[:5]]},"
                     f" counted {[counted.get(k) for k in bad[:5]]})")
    for tid, seq in seqs.items():
        known = set(calls.get(tid, []))
        for k in seq:
            if k[0] == "launch" and k[5] and (k[5], k[1]) not in known:
                fails.append(f"{name}: thread {tid}: a launch of call {k[5]} step {k[1]}"
                             " without that library call")
                break
    if times:
        fails.append(f"{name}: {len(times)} launch times out of order or step: {times[:3]}")
    if not calls or not launches:
        fails.append(f"{name}: {len(launches)} steps with launches, {len(calls)} threads with calls")
    return sorted(seqs.values()), stacked


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
plain, stacked0 = check("stacks off", capture("off", "off"))
sampled, stacked = check("stacks sample:3", capture("sampled", "sample:3"))
if stacked0 or not stacked:
    fails.append(f"launches with stacks: {stacked0} without sampling, {stacked} with")
if plain != sampled:
    n = [len(s) for s in plain], [len(s) for s in sampled]
    fails.append(f"the captures' per-thread sequences differ (lengths {n[0]} vs {n[1]})")
print(f"threads {len(plain)}, records {sum(len(s) for s in plain)}, stacked launches {stacked}")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
