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
steps = sum(1 for r in dump if r["type"] == "step" and r["kind"] == "token")
triton = sum(c for n, c in ours.items() if n.startswith("triton"))
theirs = {n: c for n, (c, _) in prof["kernels"].items()}
missing = [n for n in theirs if n not in ours and n not in gpu]
print(f"{prof['mode']}: profiler {sum(theirs.values())} kernels/{len(theirs)} names, capture "
      f"{sum(ours.values())} launches (+graph nodes), {sum(gpu.values())} GPU records; names missing "
      f"from capture {len(missing)}; triton launches {triton}; token steps {steps} "
      f"(3 generate() calls x {tokens} tokens = {3 * tokens})")
