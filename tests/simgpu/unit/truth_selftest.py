#!/usr/bin/env python3
"""Self-test of truth.py on hand-written logs: a correct log passes `check`; a wrong duration and
a FIFO overlap fail it; `steps` groups by counts and flags a model mismatch."""
import json
import os
import subprocess
import sys
import tempfile

truth = sys.argv[1]


def rec(seq, kind, name, stream, start, dur, grid=(1, 1, 1), **kw):
    r = {"seq": seq, "kind": kind, "name": name, "stream": stream, "handle": "0x0", "start_ns": start,
         "end_ns": start + dur, "via": "driver", "graph_node": None, "graph_exec": None,
         "grid": list(grid), "block": [1, 1, 1], "flops": 0, "bytes": 0, "tid": 1}
    r.update(kw)
    return r


def run(args, recs, counts=None):
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log")
        with open(log, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in recs)
        extra = []
        if counts is not None:
            cp = os.path.join(d, "counts")
            with open(cp, "w") as f:
                f.writelines(json.dumps(c) + "\n" for c in counts)
            extra = ["--counts", cp]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIMGPU_")}
        p = subprocess.run([sys.executable, truth] + args + [log] + extra, capture_output=True, text=True, env=env)
        return p.returncode, p.stdout


good = [rec(1, "kernel", "embed", 0, 1000, 1503),
        rec(2, "kernel", "rmsnorm", 0, 2503, 1540, grid=(10, 1, 1)),
        rec(3, "copy", "memcpy", 0, 4043, 1582, bytes=4096, dir="HtoD", pinned=True),
        rec(4, "kernel", "gemm", 1, 0, 5000, flops=989000.0 * 1000, bytes=4800.0 * 500)]
fails = []
rc, out = run(["check"], good)
if rc != 0:
    fails.append("good log rejected: " + out)
bad = [dict(r) for r in good]
bad[1]["end_ns"] += 1
if run(["check"], bad)[0] != 1:
    fails.append("wrong duration accepted")
overlap = [dict(r) for r in good]
overlap[1]["start_ns"] -= 10
overlap[1]["end_ns"] -= 10
if run(["check"], overlap)[0] != 1:
    fails.append("FIFO overlap accepted")
rc, out = run(["steps"], good, [{"type": "setup", "step": -1, "kernels": 1, "copies": 0},
                               {"type": "step", "step": 0, "kernels": 2, "copies": 1}])
if rc != 0 or "busy_ns=6540" not in out or "busy_ns=1503" not in out:
    fails.append("steps: " + out)
if run(["steps"], bad, [{"type": "step", "step": 0, "kernels": 3, "copies": 1}])[0] != 1:
    fails.append("steps accepted a model mismatch")
for f in fails:
    print("FAIL:", f)
print("PASS" if not fails else "FAILED")
sys.exit(1 if fails else 0)
