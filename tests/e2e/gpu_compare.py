#!/usr/bin/env python3
"""Compares a capture's GPU records (tier 2, CUPTI) with the simulator's truth log. Exit 0 when:

  1. every kernel, copy and memset the simulator executed has exactly one gpu_kernel/gpu_copy
     record with the same start_ns and end_ns (exact: simulated times are ground truth), name
     and thread, and there are no others;
  2. each is joined to the right host record: the i-th kernel the simulator ran on a thread is
     the i-th kernel the capture's launch records predict (graph replays expanded into their
     nodes), and its gpu_kernel names that launch: same step, join kind and ordinal among the
     records of that kind in the step; a graph node also names its node in the recorded
     topology, whose kernel name is the executed one.
  3. the capture's gpu_info says GPU time is on, with no drops, bad timestamps or unjoined
     records.

usage: gpu_compare.py DUMP.jsonl TRUTH.jsonl
"""
import collections
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def main():
    dump, truth = load(sys.argv[1]), load(sys.argv[2])
    errors = []
    graphs = {r["graph"]: {n["node"]: n for n in r["nodes"]} for r in dump if r["type"] == "graph"}

    # the kernels each thread's host records predict, with their join key
    expected = collections.defaultdict(list)  # tid -> [(name, step, join, index, replay)]
    count = collections.Counter()             # (tid, step, type) -> ordinal
    replay = 0
    for r in dump:
        t = r["type"]
        if t not in ("launch", "graph_launch", "copy"):
            continue
        key = (r["tid"], r["step"], t)
        idx = count[key]
        count[key] += 1
        if t == "launch":
            expected[r["tid"]].append((r["name"], r["step"], "launch", idx, None))
        elif t == "graph_launch":
            replay += 1
            for n in graphs.get(r["graph"], {}).values():
                if n["type"] in (0, "kernel"):
                    expected[r["tid"]].append((n["name"], r["step"], "graph_launch", idx, replay))

    gpu = [r for r in dump if r["type"] in ("gpu_kernel", "gpu_copy")]
    by_time = collections.defaultdict(list)
    for g in gpu:
        by_time[(g["start_ns"], g["end_ns"], g["name"])].append(g)

    used = set()
    actual = collections.defaultdict(list)  # tid -> [(truth, gpu record)]
    for t in truth:
        name = t["name"]
        cands = [g for g in by_time.get((t["start_ns"], t["end_ns"], name), []) if id(g) not in used]
        if not cands:
            errors.append(f"truth {t['kind']} {name} [{t['start_ns']}, {t['end_ns']}] has no GPU record")
            continue
        g = cands[0]
        used.add(id(g))
        if g["tid"] != t["tid"]:
            errors.append(f"{name} at {t['start_ns']}: joined to tid {g['tid']}, ran for tid {t['tid']}")
        if t["kind"] == "kernel":
            actual[t["tid"]].append((t, g))
    extra = [g for g in gpu if id(g) not in used]
    if extra:
        errors.append(f"{len(extra)} GPU records match no executed op, e.g. {extra[0]}")

    for tid, act in actual.items():
        exp = expected.get(tid, [])
        if len(exp) != len(act):
            errors.append(f"tid {tid}: {len(act)} kernels ran, launches predict {len(exp)}")
        for i, ((t, g), e) in enumerate(zip(act, exp)):
            got = (g["step"], g["join"], g["index"])
            if got != e[1:4]:
                errors.append(f"tid {tid} kernel {i} {t['name']}: joined to {got}, expected {e[1:4]}")
            if e[4] is None and g["name"] != e[0]:
                errors.append(f"tid {tid} kernel {i}: name {g['name']} != launch {e[0]}")
            if e[4] is not None:
                node = graphs.get(g["graph"], {}).get(g["node"])
                if node is None or node["name"] != t["name"]:
                    errors.append(f"tid {tid} kernel {i} {t['name']}: graph node {g['graph']}/"
                                  f"{g['node']} is {node and node['name']}")
            if len(errors) > 20:
                break

    infos = [r for r in dump if r["type"] == "gpu_info"]
    if not infos:
        errors.append("no gpu_info record")
    else:
        last = infos[-1]
        if last["status"] != "on" or last["dropped"] or last["bad_time"] or last["unjoined"]:
            errors.append(f"gpu_info: {last}")

    if errors:
        print("FAIL (GPU records):\n" + "\n".join(errors[:25]))
        return 1
    n = sum(len(v) for v in actual.values())
    print(f"GPU records match truth: {n} kernels, {len(gpu) - n} copies/memsets, exact times, "
          f"joins to launch and step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
