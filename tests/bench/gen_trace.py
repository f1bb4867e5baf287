#!/usr/bin/env python3
"""A large Kineto trace for scripts/bench.sh import: the events of a real trace (default the
shared H100 trace) repeated N times one after the other on the timeline, written as JSON.

usage: gen_trace.py OUT.json [--copies N] [--src TRACE.json.gz]

Copy k has every ts shifted by k x (the trace's length + 1 ms) and every correlation id (and flow
id) offset by k x (the largest id + 1), so that each copy's launches join its own kernels and the
steps stay apart; times are written with Kineto's three decimals from integer nanoseconds."""
import argparse, gzip, json, os

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--copies", type=int, default=116)
ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                              "traces", "h100_qwen1.5-0.5b_forward.json.gz"))
a = ap.parse_args()
with gzip.open(a.src, "rt") as f:
    doc = json.load(f)
ev = doc.pop("traceEvents")
ns = lambda x: round(x * 1000)
t0 = min(ns(e["ts"]) for e in ev if isinstance(e.get("ts"), (int, float)))
t1 = max(ns(e["ts"]) + ns(e.get("dur", 0)) for e in ev if isinstance(e.get("ts"), (int, float)))
shift = t1 - t0 + 1000000
ids = [e["args"]["correlation"] for e in ev if isinstance(e.get("args"), dict) and "correlation" in e["args"]]
ids += [e["id"] for e in ev if isinstance(e.get("id"), int)]
idstep = max(ids) + 1
# each event as text with holes for its times and ids, made once
parts = []
for e in ev:
    e = dict(e)
    ts = ns(e["ts"]) if isinstance(e.get("ts"), (int, float)) else None
    corr = e["args"].get("correlation") if isinstance(e.get("args"), dict) else None
    fid = e.get("id") if isinstance(e.get("id"), int) else None
    if ts is not None:
        e["ts"] = "@TS@"
    if corr is not None:
        e["args"] = dict(e["args"], correlation="@CORR@")
    if fid is not None:
        e["id"] = "@ID@"
    text = json.dumps(e).replace('"@TS@"', "{ts}").replace('"@CORR@"', "{corr}").replace('"@ID@"', "{fid}")
    text = text.replace("{", "{{").replace("}", "}}")
    text = text.replace("{{ts}}", "{ts}").replace("{{corr}}", "{corr}").replace("{{fid}}", "{fid}")
    parts.append((text, ts, corr, fid))
with open(a.out, "w") as f:
    head = json.dumps(doc)
    f.write(head[:-1] + (", " if doc else "") + '"traceEvents": [\n')
    first = True
    for k in range(a.copies):
        off, ioff = k * shift, k * idstep
        for text, ts, corr, fid in parts:
            v = (ts + off) if ts is not None else 0
            f.write(("" if first else ",\n") + text.format(
                ts=f"{v // 1000}.{v % 1000:03d}", corr=(corr or 0) + ioff, fid=(fid or 0) + ioff))
            first = False
    f.write("\n]}\n")
