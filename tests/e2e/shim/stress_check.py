#!/usr/bin/env python3
"""64 threads x 100k launches into tiny rings: launched = recorded + dropped, exactly.

Every record a thread attempts is counted: its launches, and the one "outside" step record the
step detector emits when the thread exits after launching; the main thread attempts one sync
record. So recorded (launch + step + sync records) + dropped (LOSS) must equal
THREADS*LAUNCHES + THREADS + 1. Counting, not timing: the result is exact however the writer and
the threads interleave.

usage: stress_check.py PROGRAM BUILD_DIR WORKDIR THREADS LAUNCHES"""
import json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import capture_one  # noqa: E402  (tests/preload.py)

prog, build, work, n, m = sys.argv[1:6]
n, m = int(n), int(m)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
cap = capture_one(build, work, [prog, str(n), str(m)],
                  dict(SIMGPU_ZERO="1", TOKPROF_RING_KB="4", TOKPROF_GPU="off"))
counts, last_loss = {}, {}
d = subprocess.Popen([os.path.join(build, "decoder/tokprof"), "dump", cap], stdout=subprocess.PIPE,
                     text=True)
for line in d.stdout:
    r = json.loads(line)
    t = r["type"]
    counts[t] = counts.get(t, 0) + 1
    if t == "loss":
        last_loss[r["tid"]] = r["dropped"]
d.wait()
recorded = counts.get("launch", 0) + counts.get("step", 0) + counts.get("sync", 0)
dropped = sum(last_loss.values())
want = n * m + n + 1
print(f"launch {counts.get('launch', 0)} step {counts.get('step', 0)} sync {counts.get('sync', 0)}"
      f" + dropped {dropped} = {recorded + dropped}; attempted {want}")
if recorded + dropped != want or dropped == 0:
    print("FAIL: records lost" if recorded + dropped != want else "FAIL: nothing dropped: rings not tiny")
    sys.exit(1)
