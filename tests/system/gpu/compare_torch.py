#!/usr/bin/env python3
"""The shim's capture of a PyTorch generate() against torch.profiler's view of the same run:
kernel counts per name, Triton kernels seen, token steps vs generated tokens (the capture holds
warm-up and timed runs too: compared per generate() call where possible).
usage: compare_torch.py DUMP.jsonl PROFILE.json TOKENS"""
import collections, json, sys

dump = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
prof = json.load(open(sys.argv[2]))
tokens = int(sys.argv[3])
graphs = {r["graph"]: [n["name"] for n in r["nodes"] if n["type"] == "kernel"]
          for r in dump if r["type"] == "graph"}
ours = collections.Counter()
for r in dump:
    if r["type"] == "launch":
        ours[r["name"]] += 1
    elif r["type"] == "graph_launch":
        ours.update(graphs.get(r["graph"], []))
gpu = collections.Counter(r["name"] for r in dump if r["type"] == "gpu_kernel")
gpu_ns = collections.Counter()
for r in dump:
    if r["type"] == "gpu_kernel":
        gpu_ns[r["name"]] += r["end_ns"] - r["start_ns"]
# per-kernel mean GPU duration, ours (CUPTI under the shim) against torch.profiler's (a separate
# run of the same workload: CUPTI takes one subscriber at a time)
rel = []
for n, (c, tot) in prof["kernels"].items():
    if gpu.get(n) and c and tot:
        ours_mean, theirs_mean = gpu_ns[n] / gpu[n], tot / c
        rel.append(abs(ours_mean - theirs_mean) / theirs_mean)
rel.sort()
dur = (f"per-kernel mean duration vs profiler: {len(rel)} names, median diff "
       f"{100 * rel[len(rel) // 2]:.1f}%, worst {100 * rel[-1]:.1f}%") if rel else "no GPU records to compare durations"
steps = sum(1 for r in dump if r["type"] == "step" and r["kind"] == "token")
triton = sum(c for n, c in ours.items() if n.startswith("triton"))
theirs = {n: c for n, (c, _) in prof["kernels"].items()}
missing = [n for n in theirs if n not in ours and n not in gpu]
print(f"{prof['mode']}: profiler {sum(theirs.values())} kernels/{len(theirs)} names, capture "
      f"{sum(ours.values())} launches (+graph nodes), {sum(gpu.values())} GPU records; names missing "
      f"from capture {len(missing)}; triton launches {triton}; token steps {steps} "
      f"(3 generate() calls x {tokens} tokens = {3 * tokens}); {dur}")
