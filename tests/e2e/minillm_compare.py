#!/usr/bin/env python3
"""Compares minillm's --log with the simulated GPU's truth log (SIMGPU_LOG).

Truth records (kernels, copies, memsets) are taken in host launch order (seq): first the setup
record's kernels+copies, then each step's kernels+copies, one step after the other (one thread),
or per stream (--threads N: each decode thread uses its own stream). For every step:
  * minillm's own kernel names and counts equal the truth's (kernel_counts);
  * every other truth kernel is a library kernel, and there are exactly library_kernels of them;
  * copies/memsets count equals copies;
  * via: "graph" for exactly graph_kernels records, "driver" for driver_launches, "library" for
    eager library kernels, "runtime" for everything else;
  * no truth record is left over.
Exit 0 when everything matches, 1 with one line per mismatch otherwise."""
import argparse
import collections
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("minillm_log")
    ap.add_argument("truth_log")
    args = ap.parse_args()
    mlog = load(args.minillm_log)
    truth = sorted(load(args.truth_log), key=lambda r: r["seq"])
    setup = mlog[0]
    steps = [r for r in mlog if r.get("type") == "step"]
    errors = []
    own = set(setup["kernel_counts"])
    for s in steps:
        own |= set(s["kernel_counts"])

    def check(label, rec, recs):
        kernels = [r for r in recs if r["kind"] == "kernel"]
        copies = [r for r in recs if r["kind"] in ("copy", "memset")]
        if len(kernels) != rec["kernels"] or len(copies) != rec["copies"]:
            errors.append(f"{label}: truth has {len(kernels)} kernels / {len(copies)} copies, "
                          f"minillm says {rec['kernels']} / {rec['copies']}")
        mine = collections.Counter(r["name"] for r in kernels if r["name"] in own)
        if mine != collections.Counter(rec["kernel_counts"]):
            diff = (mine - collections.Counter(rec["kernel_counts"])) + (collections.Counter(rec["kernel_counts"]) - mine)
            errors.append(f"{label}: kernel names differ: {dict(diff)}")
        lib = [r for r in kernels if r["name"] not in own]
        if len(lib) != rec.get("library_kernels", 0):
            errors.append(f"{label}: {len(lib)} library kernels in truth, minillm expects {rec.get('library_kernels', 0)}")
        via = collections.Counter(r["via"] for r in kernels)
        if via["graph"] != rec.get("graph_kernels", 0):
            errors.append(f"{label}: {via['graph']} kernels via graph, expected {rec.get('graph_kernels', 0)}")
        if via["driver"] != rec.get("driver_launches", 0):
            errors.append(f"{label}: {via['driver']} kernels via driver, expected {rec.get('driver_launches', 0)}")
        for r in kernels:
            if r["via"] in ("graph", "driver"):
                continue
            want = "runtime" if r["name"] in own else "library"
            if r["via"] != want:
                errors.append(f"{label}: seq {r['seq']} {r['name'][:60]} via {r['via']}, expected {want}")
                break
        for r in copies:
            if r["via"] not in ("runtime", "graph"):
                errors.append(f"{label}: seq {r['seq']} {r['kind']} via {r['via']}")
                break
        if rec.get("graph_launches", 0) and not any(r.get("graph_exec") for r in kernels if r["via"] == "graph"):
            errors.append(f"{label}: graph kernels carry no graph_exec")

    n_setup = setup["kernels"] + setup["copies"]
    check("setup", setup, truth[:n_setup])
    rest = truth[n_setup:]
    nthreads = setup.get("threads", 1)
    if nthreads == 1:
        groups = [rest]
    else:
        by_stream = collections.OrderedDict()
        for r in rest:
            by_stream.setdefault(r["stream"], []).append(r)
        groups = list(by_stream.values())
        if len(groups) != nthreads:
            errors.append(f"{len(groups)} streams after setup, expected {nthreads}")
    per_thread = collections.defaultdict(list)
    for s in steps:
        per_thread[s["thread"]].append(s)
    unmatched = set(per_thread)
    for gi, recs in enumerate(groups):
        # Threads have identical step shapes unless routing differs: pick the first thread whose
        # per-step record counts fit this stream.
        cand = None
        for t in sorted(unmatched):
            if sum(s["kernels"] + s["copies"] for s in per_thread[t]) == len(recs):
                cand = t
                break
        if cand is None:
            cand = min(unmatched) if unmatched else 0
        unmatched.discard(cand)
        pos = 0
        for s in per_thread[cand]:
            n = s["kernels"] + s["copies"]
            check(f"thread {cand} step {s['step']}", s, recs[pos:pos + n])
            pos += n
        if pos != len(recs):
            errors.append(f"stream group {gi}: {len(recs) - pos} truth records not accounted for")
    for e in errors[:40]:
        print("MISMATCH", e)
    nk = sum(1 for r in truth if r["kind"] == "kernel")
    print(f"{'FAIL' if errors else 'OK'}: {len(steps)} steps, {nk} kernels, {len(truth) - nk} copies/memsets compared"
          f"{', ' + str(len(errors)) + ' mismatches' if errors else ''}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
