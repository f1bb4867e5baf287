#!/usr/bin/env python3
"""TOKPROF_TIME_NS=Q (docs/OPERATIONS.md, "Budgets"): every host time the writer writes is
rounded down to a multiple of Q ns, durations inside calls too, and nothing else moves: the same
records as the simulator's truth (one launch per kernel), host times still at or before what they
stamp (a kernel starts >= 2000 ns after its recorded launch), GPU times exact, and the capture
says its grain (META config.time_ns, `tokprof summary`). Without the setting the grain is 1.

usage: timegrain_check.py BUILD_DIR WORKDIR"""
import json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import capture_one  # noqa: E402  (tests/preload.py)

build, work = sys.argv[1:3]
tokprof = os.path.join(build, "decoder/tokprof")
HOST = ("host_ns", "call_ns", "wait_ns", "begin_ns", "mark_ns", "end_ns")
shutil.rmtree(work, ignore_errors=True)
fails = []


def run(name, q, style):
    d = os.path.join(work, name)
    settings = dict(TOKPROF_GPU="always", SIMGPU_LOG=os.path.join(d, "truth.jsonl"))
    if q:
        settings["TOKPROF_TIME_NS"] = str(q)
    os.makedirs(d)
    cap = capture_one(build, d, [os.path.join(build, "kernels/minillm"), *style, "--steps", "60"],
                      settings)
    recs = [json.loads(l) for l in subprocess.run([tokprof, "dump", "--raw", cap], check=True,
                                                   capture_output=True, text=True).stdout.splitlines()]
    truth = [json.loads(l) for l in open(os.path.join(d, "truth.jsonl"))]
    summ = json.loads(subprocess.run([tokprof, "summary", "--json", cap], check=True,
                                     capture_output=True, text=True).stdout)
    text = subprocess.run([tokprof, "summary", cap], check=True, capture_output=True, text=True).stdout
    return recs, truth, summ, text


def check(name, q, style):
    recs, truth, summ, text = run(name, q, style)
    grain = q or 1
    meta = [r for r in recs if r["type"] == "meta"]
    if not meta or meta[0]["config"].get("time_ns") != grain:
        fails.append(f"{name}: META config.time_ns {meta and meta[0]['config'].get('time_ns')}, want {grain}")
    if summ.get("host_time_ns") != grain:
        fails.append(f"{name}: summary host_time_ns {summ.get('host_time_ns')}, want {grain}")
    said = f"host times to {grain} ns" in text
    if said != (grain > 1):
        fails.append(f"{name}: summary's capture line {'says' if said else 'does not say'} the grain")
    host = [(r["type"], k, r[k]) for r in recs if not r["type"].startswith("gpu_")
            for k in HOST if isinstance(r.get(k), int)]
    off = [h for h in host if h[2] % grain]
    if off:
        fails.append(f"{name}: {len(off)} of {len(host)} host times not a multiple of {grain}, e.g. {off[0]}")
    for k in ("call_ns", "wait_ns", "begin_ns"):
        if not any(h[1] == k for h in host):
            fails.append(f"{name}: no {k} in the capture: the check would not see it")
    gpu = [r["end_ns"] for r in recs if r["type"] == "gpu_kernel"]
    if grain > 1 and (not gpu or all(t % grain == 0 for t in gpu)):
        fails.append(f"{name}: GPU times rounded too (or none): they must stay exact")
    launches = [r for r in recs if r["type"] == "launch"]
    kernels = [t for t in truth if t["kind"] == "kernel"]
    if len(launches) != len(kernels) or summ["dropped"]:
        fails.append(f"{name}: {len(launches)} launches for {len(kernels)} kernels, {summ['dropped']} dropped")
        return
    d = [t["start_ns"] - c["host_ns"] for c, t in zip(launches, kernels)]
    if min(d) < 2000:
        fails.append(f"{name}: a kernel starts {min(d)} ns after its recorded launch (< 2000): a host "
                     "time was rounded up")
    print(f"{name}: {len(host)} host times, {len(launches)} launches, grain {grain}, "
          f"launch -> start min {min(d)} ns")


check("exact", 0, ["--style", "vllm"])
check("q64", 64, ["--style", "vllm"])
check("q1000_hf", 1000, ["--style", "hf", "--sched", "async"])
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
