#!/usr/bin/env python3
"""Host timestamps in a capture are CLOCK_MONOTONIC ns, whichever clock the shim used to take them
(TOKPROF_CLOCK=auto: raw TSC converted by the writer; monotonic: clock_gettime). The simulator
starts a kernel on an idle stream exactly 2000 ns after it saw the launch, on the same clock, and
sees the launch after the shim stamped it: so for every kernel, launch host_ns + 2000 <= truth
start_ns, and on an idle stream the difference is a few microseconds at most.

usage: clock_check.py BUILD_DIR WORKDIR MODE"""
import json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import capture_one  # noqa: E402  (tests/preload.py)

build, work, mode = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
cap = capture_one(build, work, [os.path.join(build, "kernels/minillm"), "--style", "hf", "--steps", "40"],
                  dict(TOKPROF_GPU="off", TOKPROF_CLOCK=mode,
                       SIMGPU_LOG=os.path.join(work, "truth.jsonl")))
out = subprocess.run([os.path.join(build, "decoder/tokprof"), "dump", "--type", "launch", cap],
                     capture_output=True, text=True, check=True).stdout
launches = [json.loads(l) for l in out.splitlines()]
truth = [t for t in map(json.loads, open(os.path.join(work, "truth.jsonl"))) if t["kind"] == "kernel"]
if len(launches) != len(truth):
    print(f"FAIL: {len(launches)} launches, {len(truth)} kernels")
    sys.exit(1)
d = sorted(t["start_ns"] - c["host_ns"] for c, t in zip(launches, truth))
print(f"TOKPROF_CLOCK={mode}: launch -> start min {d[0]} ns, median {d[len(d) // 2]} ns")
if d[0] < 2000:
    print("FAIL: a kernel started less than the 2000 ns launch latency after its recorded launch")
    sys.exit(1)
if d[0] > 50000:
    print("FAIL: no kernel started within 50 us of its launch: host times are off")
    sys.exit(1)
