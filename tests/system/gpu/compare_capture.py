#!/usr/bin/env python3
"""On a real GPU (no ground truth): the capture's token steps and minillm's own kernels per step
(eager launches plus graph nodes) against minillm's --log. Library kernels are left out: real
cuBLAS picks its own kernels. Prints one line; exit 1 on a mismatch.

usage: compare_capture.py DUMP.jsonl MINILLM.jsonl"""
import collections, json, sys

dump = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
mini = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
graphs = {r["graph"]: [n["name"] for n in r["nodes"] if n["type"] == "kernel"]
          for r in dump if r["type"] == "graph"}
own = set()
for m in mini:
    own.update(m.get("kernel_counts", {}))
per_seg = collections.Counter()
for r in dump:
    key = (r.get("tid"), r.get("step"))
    if r["type"] == "launch" and r["name"] in own:
        per_seg[key] += 1
    elif r["type"] == "graph_launch":
        per_seg[key] += sum(1 for n in graphs.get(r["graph"], []) if n in own)
cap = collections.defaultdict(list)
for r in dump:
    if r["type"] == "step" and r["kind"] == "token":
        cap[r["tid"]].append(per_seg[(r["tid"], r["step"])])
want = collections.defaultdict(list)
for m in mini:
    if m["type"] == "step":
        want[m.get("thread", 0)].append(sum(m.get("kernel_counts", {}).values()))
a, b = sorted(cap.values()), sorted(want.values())
steps = sum(len(v) for v in b)
if a == b:
    print(f"OK: {steps} steps, minillm's kernels per step equal")
    sys.exit(0)
print(f"MISMATCH: capture {[len(v) for v in a]} steps {a[:1]} vs minillm {[len(v) for v in b]} {b[:1]}")
sys.exit(1)
