#!/usr/bin/env python3
"""64 threads x 100k launches into tiny rings: launched = recorded + dropped, exactly.

Every record a thread attempts is counted: its launches, and the one "outside" step record the
step detector emits when the thread exits after launching; the main thread attempts one sync
record. So recorded (launch + step + sync records) + dropped (LOSS) must equal
THREADS*LAUNCHES + THREADS + 1. Counting, not timing: the result is exact however the writer and
the threads interleave.

With `ringless`, the rings' budget holds four rings (TOKPROF_BUFFER_MB=1, TOKPROF_RING_KB=256):
the other threads get none until a thread exits and its ring is freed, and drop (and count) their
records meanwhile. The count must still be exact; the shim says so once on stderr (one tokprof
line naming the two settings); and a thread refused a ring asks again only after a ring was freed,
not at every launch (under TOKPROF_LOG=debug each refusal after the first is a line: at most
THREADS * (THREADS + 1) of them, where asking at every launch would write one per launch).

usage: stress_check.py PROGRAM BUILD_DIR WORKDIR THREADS LAUNCHES [ringless]"""
import json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import capture_one  # noqa: E402  (tests/preload.py)

prog, build, work, n, m = sys.argv[1:6]
n, m = int(n), int(m)
ringless = sys.argv[6:7] == ["ringless"]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
settings = dict(SIMGPU_ZERO="1", TOKPROF_RING_KB="4", TOKPROF_GPU="off")
if ringless:
    settings.update(TOKPROF_RING_KB="256", TOKPROF_BUFFER_MB="1", TOKPROF_LOG="debug")
err = []
cap = capture_one(build, work, [prog, str(n), str(m)], settings, stderr=err)
if ringless:
    said = [l for l in err[0].splitlines() if "gets no ring" in l]
    asked = [l for l in err[0].splitlines() if "no ring for thread" in l]
    print(f"{len(said)} warning, {len(asked)} refusals after it")
    if len(said) != 1 or "TOKPROF_BUFFER_MB=1" not in said[0] or "TOKPROF_RING_KB" not in said[0]:
        sys.exit(f"FAIL: want one warning naming the settings, stderr has {said}")
    if len(asked) > n * (n + 1):
        sys.exit(f"FAIL: {len(asked)} refusals: a ringless thread asks at every launch")
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
# A thread that has no ring when it exits has no step state either: it attempts no step record.
# Then every launch is still recorded or counted, and of the n step records those recorded and
# some of the rest were attempted.
low = n * m + counts.get("step", 0) + 1 if ringless else want
print(f"launch {counts.get('launch', 0)} step {counts.get('step', 0)} sync {counts.get('sync', 0)}"
      f" + dropped {dropped} = {recorded + dropped}; attempted {want if not ringless else f'{low}..{want}'}")
if not low <= recorded + dropped <= want or dropped == 0:
    print("FAIL: records lost" if dropped else "FAIL: nothing dropped: rings not tiny")
    sys.exit(1)
