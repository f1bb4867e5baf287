#!/usr/bin/env python3
"""Per-kernel GPU time: tokprof's GPU records against nsys's cuda_gpu_kern_sum report.
usage: compare_nsys.py DUMP.jsonl NSYS_KERN_SUM.csv"""
import collections, csv, json, sys

ours = collections.defaultdict(lambda: [0, 0])
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["type"] == "gpu_kernel":
        ours[r["name"]][0] += 1
        ours[r["name"]][1] += r["end_ns"] - r["start_ns"]
if not ours:
    print("no GPU records in the capture (CUPTI unavailable?)")
    sys.exit(1)
theirs = {}
for row in csv.DictReader(open(sys.argv[2])):
    name = row.get("Name") or row.get("name")
    theirs[name] = (int(float(row["Instances"])), float(row["Total Time (ns)"]))
worst, n = 0.0, 0
for name, (cnt, tot) in theirs.items():
    if name not in ours:
        continue
    n += 1
    worst = max(worst, abs(ours[name][1] - tot) / tot if tot else 0)
print(f"{n} kernels compared, worst total-time difference {100 * worst:.2f}%")
