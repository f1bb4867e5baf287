#!/usr/bin/env python3
"""simgpu truth-log tool (Python 3 stdlib only). See README.md, "Truth log" and "Cost model".

  truth.py check LOG [--cost FILE] [--zero]
      Recomputes every kernel/copy/memset duration from the documented cost model, with an
      implementation independent of the simulator's C code, and checks end_ns - start_ns equals
      it exactly (records marked "faulted" by SIMGPU_SLOW/SIMGPU_JITTER are skipped), and that
      each stream is a FIFO: an op starts no earlier than everything enqueued before it on its
      stream has ended (nodes of one graph launch may overlap each other). The cost file
      defaults to $SIMGPU_COST and zero mode to $SIMGPU_ZERO, as in the simulator.
      Exit 0 if all hold, 1 otherwise.

  truth.py steps LOG --counts FILE [--cost FILE] [--zero] [--json]
      Splits the log into consecutive groups given by FILE's JSON lines
      {"type": "setup"|"step", "step": i, "kernels": K, "copies": C, ...} (K kernel executions,
      graph nodes included, and C memcpy+memset executions, in launch order), and prints per
      group: GPU busy time (sum of kernel durations), span (last end - first start), and the
      cost-model sum of its kernels. Exit 1 if any group's sum differs from the model or the
      log runs short.
"""
import argparse
import json
import math
import os
import re
import sys

# Defaults: keep equal to driver/cost.c (this is the independent copy the tests compare with).
CONSTS = {"latency_ns": 2000.0, "copy_base_ns": 1500.0, "memset_base_ns": 1000.0,
          "pinned_bw": 50.0, "pageable_bw": 20.0, "dtod_bw": 2400.0, "hbm_bw": 4800.0,
          "peak_flops": 989000.0}
FAMILIES = [("attention", "attn|attention|flash|fmha|sdpa", 6000.0, 40.0),
            ("moe", "moe|expert|router", 5000.0, 20.0),
            ("gemm", "gemm|gemv|matmul|cublas|cutlass|mma", 4000.0, 25.0),
            ("norm", "norm", 1500.0, 4.0),
            ("rope", "rope|rotary", 1200.0, 3.0),
            ("kvcache", "kv_?cache|kvcache|paged|cache", 1500.0, 4.0),
            ("embedding", "embed", 1500.0, 3.0),
            ("sampling", "sampl|argmax|topk|top_k|softmax|logits", 2500.0, 10.0),
            ("activation", "silu|gelu|relu|swiglu|activation|act_", 1000.0, 2.0),
            ("copy", "copy|memcpy|cast|convert|fill|transpose", 1000.0, 1.0),
            ("other", ".*", 2000.0, 5.0)]


class Model:
    def __init__(self, cost_file=None, zero=False):
        self.c = dict(CONSTS)
        fams = []
        if cost_file:
            for line in open(cost_file):
                line = line.split("#", 1)[0].split()
                if len(line) == 3 and line[0] == "set":
                    self.c[line[1]] = float(line[2])
                elif len(line) == 4:
                    fams.append((line[0], line[1], float(line[2]), float(line[3])))
        self.fams = [(n, re.compile(p, re.I), b, k) for n, p, b, k in fams + FAMILIES]
        self.zero = zero

    @staticmethod
    def rnd(x):
        return 0 if x <= 0 else int(math.floor(x + 0.5))

    def family(self, name):
        for n, rx, b, k in self.fams:
            if rx.search(name):
                return n, b, k
        return "other", 2000.0, 5.0

    def duration(self, r):
        if self.zero:
            return 0
        c = self.c
        if r["kind"] == "kernel":
            _, base, per_block = self.family(r["name"])
            if r["flops"] > 0 or r["bytes"] > 0:
                return self.rnd(base + max(r["flops"] / c["peak_flops"], r["bytes"] / c["hbm_bw"]))
            gx, gy, gz = r["grid"]
            return self.rnd(base + per_block * (float(gx) * float(gy) * float(gz)))
        if r["kind"] == "copy":
            bw = c["dtod_bw"] if r["dir"] == "DtoD" else c["pinned_bw"] if r["pinned"] else c["pageable_bw"]
            return self.rnd(c["copy_base_ns"] + r["bytes"] / bw)
        return self.rnd(c["memset_base_ns"] + r["bytes"] / c["hbm_bw"])


def load(path):
    recs = [json.loads(line) for line in open(path) if line.strip()]
    recs.sort(key=lambda r: r["seq"])
    return recs


def check(recs, model):
    errors = []
    for r in recs:
        if r.get("faulted"):
            continue
        want = model.duration(r)
        if r["end_ns"] - r["start_ns"] != want:
            errors.append(f"seq {r['seq']} {r['name']}: duration {r['end_ns'] - r['start_ns']} != model {want}")
    tails = {}   # stream -> end of everything enqueued so far
    group = {}   # stream -> (graph_exec, node ids seen, tail before the launch)
    for r in recs:
        s = r["stream"]
        tail = tails.get(s, 0)
        if r["graph_exec"] is not None:
            g = group.get(s)
            if g is None or g[0] != r["graph_exec"] or r["graph_node"] in g[1]:
                g = (r["graph_exec"], set(), tail)
                group[s] = g
            g[1].add(r["graph_node"])
            floor = g[2]
        else:
            group.pop(s, None)
            floor = tail
        if r["start_ns"] < floor:
            errors.append(f"seq {r['seq']} {r['name']}: starts {floor - r['start_ns']} ns before stream {s}'s earlier work ends")
        tails[s] = max(tail, r["end_ns"])
    return errors


def step_groups(recs, groups):
    """The truth records (in seq order) split into the program's step groups (its log's lines,
    {"kernels": K, "copies": C, ...}): each group takes as many kernels and copies as it says.
    Returns [(group, members, kernels taken, copies taken)] and the records left after the last."""
    out, i = [], 0
    for g in groups:
        want_k, want_c = int(g.get("kernels", 0)), int(g.get("copies", 0))
        k = c = 0
        members = []
        while (k < want_k or c < want_c) and i < len(recs):
            r = recs[i]
            i += 1
            members.append(r)
            if r["kind"] == "kernel":
                k += 1
            else:
                c += 1
        out.append((g, members, k, c))
    return out, len(recs) - i


def steps(recs, model, counts_path, as_json):
    groups = [json.loads(line) for line in open(counts_path) if line.strip()]
    split, left = step_groups(recs, groups)
    bad = False
    for g, members, k, c in split:
        want_k, want_c = int(g.get("kernels", 0)), int(g.get("copies", 0))
        kern = [r for r in members if r["kind"] == "kernel"]
        busy = sum(r["end_ns"] - r["start_ns"] for r in kern)
        mod = sum(model.duration(r) for r in kern)
        span = (max(r["end_ns"] for r in members) - min(r["start_ns"] for r in members)) if members else 0
        ok = k == want_k and c == want_c and busy == mod
        bad |= not ok
        out = {"type": g.get("type"), "step": g.get("step"), "kernels": k, "copies": c,
               "busy_ns": busy, "span_ns": span, "model_ns": mod, "ok": ok}
        if as_json:
            print(json.dumps(out))
        else:
            print(f"{out['type']:5} {str(out['step']):>4} kernels={k} copies={c} busy_ns={busy} "
                  f"span_ns={span} model_ns={mod} {'ok' if ok else 'MISMATCH'}")
    if left:
        print(f"note: {left} records after the last group", file=sys.stderr)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["check", "steps"])
    ap.add_argument("log")
    ap.add_argument("--counts")
    ap.add_argument("--cost", default=os.environ.get("SIMGPU_COST") or None)
    ap.add_argument("--zero", action="store_true",
                    default=os.environ.get("SIMGPU_ZERO", "") not in ("", "0"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    model = Model(a.cost, a.zero)
    recs = load(a.log)
    if a.cmd == "check":
        errors = check(recs, model)
        for e in errors[:50]:
            print("FAIL:", e)
        print(f"{len(recs)} records, {len(errors)} errors")
        return 1 if errors else 0
    if not a.counts:
        ap.error("steps needs --counts FILE")
    return steps(recs, model, a.counts, a.json)


if __name__ == "__main__":
    sys.exit(main())
