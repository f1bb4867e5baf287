#!/usr/bin/env python3
"""Compares a tokprof capture (as `tokprof dump` JSON lines) with the simulator's truth log and
minillm's own log. Exit 0 when:

  1. every kernel the simulator executed appears exactly once in the capture, on the same OS
     thread, in the same order, with the same name and stream handle, launched the same way
     (runtime / driver-or-library / graph node);
  2. graph replays are recorded once each, and the kernels inside each replay are the nodes of
     the topology the capture recorded for that graph;
  3. the capture's token steps per thread equal minillm's steps: same number, and per step the
     same number of kernels (eager + graph nodes) and copies; the set-up segment too.

usage: capture_compare.py DUMP.jsonl TRUTH.jsonl MINILLM.jsonl
"""
import collections
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def hexint(v):
    if isinstance(v, str):
        return int(v, 16) if v.startswith("0x") else int(v)
    return int(v)


def main():
    dump, truth, mini = (load(p) for p in sys.argv[1:4])
    errors = []

    graphs = {}
    for r in dump:
        if r["type"] == "graph":
            graphs[r["graph"]] = [n for n in r["nodes"] if n.get("type") in (0, "kernel")]

    # 1 + 2: per thread, the capture's launches (graph launches expanded) against the truth
    expected = collections.defaultdict(list)  # tid -> [(name, stream, via-class, group)]
    graph_launches = 0
    for r in dump:
        if r["type"] == "launch":
            via = "runtime" if r["via"].startswith("runtime") else "driver"
            expected[r["tid"]].append((r["name"], hexint(r["stream"]), via, None))
        elif r["type"] == "graph_launch":
            graph_launches += 1
            nodes = graphs.get(r["graph"])
            if nodes is None:
                errors.append(f"graph launch of graph {r['graph']} without its topology")
                continue
            for n in nodes:
                expected[r["tid"]].append((n["name"], hexint(r["stream"]), "graph", graph_launches))

    actual = collections.defaultdict(list)
    for t in truth:
        if t["kind"] != "kernel":
            continue
        via = {"runtime": "runtime", "driver": "driver", "library": "driver", "graph": "graph"}[t["via"]]
        actual[t["tid"]].append((t["name"], hexint(t["handle"]), via))

    if set(expected) != set(actual):
        errors.append(f"threads differ: capture {sorted(expected)} truth {sorted(actual)}")
    total = 0
    for tid in actual:
        exp, act = expected.get(tid, []), actual[tid]
        total += len(act)
        if len(exp) != len(act):
            errors.append(f"tid {tid}: {len(act)} kernels executed, {len(exp)} in the capture")
        # graph nodes may execute in any topological order: compare each replay as a multiset
        i = 0
        while i < min(len(exp), len(act)):
            e = exp[i]
            if e[3] is not None:
                j = i
                while j < len(exp) and exp[j][3] == e[3]:
                    j += 1
                want = sorted((x[0], x[1], x[2]) for x in exp[i:j])
                got = sorted(act[i:j])
                if want != got:
                    errors.append(f"tid {tid}: graph replay at kernel {i}: nodes {want[:3]}... "
                                  f"!= executed {got[:3]}...")
                i = j
                continue
            if (e[0], e[1], e[2]) != act[i]:
                errors.append(f"tid {tid}: kernel {i}: capture {e[:3]} != truth {act[i]}")
                if len(errors) > 20:
                    break
            i += 1

    # 3: steps per thread against minillm's log
    seg_kernels = collections.Counter()
    seg_copies = collections.Counter()
    for r in dump:
        if r["type"] == "launch":
            seg_kernels[(r["tid"], r["step"])] += 1
        elif r["type"] == "graph_launch":
            seg_kernels[(r["tid"], r["step"])] += len(graphs.get(r["graph"], []))
        elif r["type"] == "copy":
            seg_copies[(r["tid"], r["step"])] += 1
    steps_by_tid = collections.defaultdict(list)
    outside = []
    for r in dump:
        if r["type"] != "step":
            continue
        key = (r["tid"], r["step"])
        if r["kind"] == "token":
            steps_by_tid[r["tid"]].append((r["step"], seg_kernels[key], seg_copies[key]))
        else:
            outside.append((seg_kernels[key], seg_copies[key]))
    cap_seqs = sorted([(k, c) for _, k, c in sorted(v)] for v in steps_by_tid.values())

    mini_by_thread = collections.defaultdict(list)
    setup = None
    for m in mini:
        if m["type"] == "setup":
            setup = (m["kernels"], m["copies"])
        elif m["type"] == "step":
            mini_by_thread[m.get("thread", 0)].append((m["step"], m["kernels"], m["copies"]))
    mini_seqs = sorted([(k, c) for _, k, c in sorted(v)] for v in mini_by_thread.values())
    if cap_seqs != mini_seqs:
        errors.append("steps differ (kernels, copies) per thread:\n  capture " +
                      "\n          ".join(str(s) for s in cap_seqs) + "\n  minillm " +
                      "\n          ".join(str(s) for s in mini_seqs))
    if setup and setup not in outside:
        errors.append(f"set-up segment {setup} not among the capture's outside segments {outside}")

    if errors:
        print("FAIL:\n" + "\n".join(errors[:25]))
        return 1
    nsteps = sum(len(v) for v in steps_by_tid.values())
    print(f"capture matches truth: {total} kernels, {graph_launches} graph replays, "
          f"{nsteps} steps on {len(steps_by_tid)} thread(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
