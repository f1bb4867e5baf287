#!/usr/bin/env python3
"""Library calls in a capture against minillm's own log and the simulator's truth (issue 5).

usage: libcalls_compare.py --minillm EXE --simgpu DIR --workdir DIR --shim SO --tokprof TKP
                           [--experts E] -- MINILLM_ARGS

Runs minillm under the shim and checks, exactly:
  - every GEMM call is recorded once (cuBLAS calls cuBLASLt inside: still one record), with the
    api, m, n, k, batch, types and transposes minillm logged, in order, step by step;
  - tokens per step and the prefill/decode kind from `tokprof gemm --json` equal minillm's;
  - every library kernel launch carries its call's id: the sequence of library kernel names in
    the truth log equals that of the capture's launches with a call, and the kernels per call
    follow the simulated cuBLAS split-K rule (minillm's library_kernels per step);
  - with --experts, `tokprof moe --json` gives minillm's expert_load for every step;
  - with --moe-fused, `tokprof moe --json` reports no expert (the load is routed on the GPU inside
    fused_moe_kernel) and the fused kernel's launches and GPU time per step, equal to the sums
    over the capture's own launch, graph and GPU kernel records."""
import argparse
import json
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)


def sh(cmd, env=None):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    if p.returncode != 0:
        sys.stdout.write(p.stdout + p.stderr)
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}")
    return p.stdout


def jl(text):
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def splitk_kernels(g):
    # tests/simgpu/libs/README.md: a second (reduce) kernel when split-K applies
    return 2 if g["batch"] == 1 and g["k"] >= 1024 and g["k"] >= 4 * g["m"] and g["n"] <= 64 else 1


def fused_errors(a, cap, launches):
    """tokprof moe on fused expert kernels: no experts, and per step the fused kernels' launches
    (eager, and graph kernel nodes per replay) and GPU time, from the raw records (one thread)."""
    errors = []
    moe = json.loads(sh([a.tokprof, "moe", "--json", cap]))
    if moe["threads"]:
        errors.append(f"moe: {len(moe['threads'])} threads of experts on fused kernels")
    fu = moe.get("fused")
    if not fu or fu["per_expert_observable"] is not False:
        return errors + [f"moe: no fused view: {moe}"]
    if not any("fused_moe_kernel" in k for k in fu["kernels"]):
        errors.append(f"moe: fused kernels {fu['kernels']}")
    want = {}
    for l in launches:
        if "fused_moe_kernel" in l["name"]:
            want.setdefault(l["step"], [0, 0, 0])[0] += 1
    graphs = {g["graph"]: sum("fused_moe_kernel" in n["name"] for n in g["nodes"])
              for g in jl(sh([a.tokprof, "dump", "--type", "graph", cap]))}
    for g in jl(sh([a.tokprof, "dump", "--type", "graph_launch", cap])):
        if graphs.get(g["graph"]):
            want.setdefault(g["step"], [0, 0, 0])[0] += graphs[g["graph"]]
    for k in jl(sh([a.tokprof, "dump", "--type", "gpu_kernel", cap])):
        if "fused_moe_kernel" in k["name"] and k["join"] != "none":
            r = want.setdefault(k["step"], [0, 0, 0])
            r[1] += 1
            r[2] += k["end_ns"] - k["start_ns"]
    if len(fu["threads"]) != 1:  # minillm --moe-fused runs the model on one thread
        return errors + [f"moe fused: {len(fu['threads'])} threads"]
    got = {s["step"]: [s["launches"], s["kernels"], s["gpu_ns"] or 0] for s in fu["threads"][0]["steps"]}
    if got != want:
        diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        errors.append(f"moe fused per step: {len(diff)} steps differ, first {diff[0]}: "
                      f"got {got.get(diff[0])}, want {want.get(diff[0])}")
    if not want:
        errors.append("no fused_moe_kernel in the capture")
    return errors


def main():
    ap = argparse.ArgumentParser()
    for a in ("--minillm", "--simgpu", "--workdir", "--shim", "--tokprof"):
        ap.add_argument(a, required=True)
    ap.add_argument("--experts", type=int, default=0)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    margs = [x for x in a.args if x != "--"]
    os.makedirs(a.workdir, exist_ok=True)
    for f in os.listdir(a.workdir):
        os.unlink(os.path.join(a.workdir, f))
    mlog, tlog = os.path.join(a.workdir, "minillm.jsonl"), os.path.join(a.workdir, "truth.jsonl")
    env = dict(os.environ, LD_LIBRARY_PATH=a.simgpu, SIMGPU_LOG=tlog,
               LD_PRELOAD=shim_preload(a.shim), TOKPROF_OUT=a.workdir)
    sh([a.minillm, *margs, "--log", mlog], env)
    cap = [f for f in os.listdir(a.workdir) if f.endswith(".tokprof")]
    if len(cap) != 1:
        raise SystemExit(f"FAIL: expected one capture, found {cap}")
    cap = os.path.join(a.workdir, cap[0])
    mlines = [x for x in jl(open(mlog).read()) if x.get("type") == "step"]
    truth = jl(open(tlog).read())
    calls = jl(sh([a.tokprof, "dump", "--type", "lib_call", cap]))
    launches = jl(sh([a.tokprof, "dump", "--type", "launch", cap]))
    gemm = json.loads(sh([a.tokprof, "gemm", "--json", cap]))
    errors = []

    # capture steps with library calls, per thread (tid order = minillm thread order)
    tids = sorted({c["tid"] for c in calls}, key=lambda t: min(c["host_ns"] for c in calls if c["tid"] == t))
    by_step = {}
    for c in calls:
        by_step.setdefault((c["tid"], c["step"]), []).append(c)
    threads = {}
    for (tid, step) in sorted(by_step):
        threads.setdefault(tid, []).append(step)
    if len(tids) != len({m["thread"] for m in mlines}):
        errors.append(f"{len(tids)} threads with library calls, minillm has "
                      f"{len({m['thread'] for m in mlines})}")
    gsteps = {}
    idx_of_tid = {}
    for s in gemm["steps"]:
        gsteps[(s["thread"], s["step"])] = s
    ncalls = 0
    for ti, tid in enumerate(tids):
        msteps = [m for m in mlines if m["thread"] == ti]
        csteps = threads.get(tid, [])
        if len(msteps) != len(csteps):
            errors.append(f"thread {ti}: {len(csteps)} steps with calls, minillm {len(msteps)}")
            continue
        # the capture-local thread index of this tid: from gemm steps with the same step ids
        for ms, cs in zip(msteps, csteps):
            got = [(c["op"], c["m"], c["n"], c["k"], c["batch"], c["atype"], c["ctype"],
                    c["compute"], c["transa"], c["transb"]) for c in by_step[(tid, cs)]]
            want = [(g["api"], g["m"], g["n"], g["k"], g["batch"], g["atype"], g["ctype"],
                     g["compute"], g["transa"], g["transb"]) for g in ms["gemms"]]
            ncalls += len(want)
            if got != want:
                errors.append(f"thread {ti} step {ms['step']}: calls differ\n  got  {got[:4]}...\n"
                              f"  want {want[:4]}...")
            # kernels per call: launches carrying each call id
            per = {}
            for l in launches:
                if l["tid"] == tid and "call" in l:
                    per[l["call"]] = per.get(l["call"], 0) + 1
            kk = [per.get(c["call"], 0) for c in by_step[(tid, cs)]]
            if "--graphs" not in margs and kk != [splitk_kernels(g) for g in ms["gemms"]]:
                errors.append(f"thread {ti} step {ms['step']}: kernels per call {kk}")
            if "--graphs" not in margs and sum(kk) != ms["library_kernels"]:
                errors.append(f"thread {ti} step {ms['step']}: {sum(kk)} library kernels, "
                              f"minillm {ms['library_kernels']}")
            idx_of_tid[tid] = None
            cand = [s for (t, st), s in gsteps.items() if st == cs]
            # steps with the same segment index on other threads: pick by GEMM count
            cand = [s for s in cand if s["gemm_calls"] == len(by_step[(tid, cs)])]
            if not any(s["tokens"] == ms["tokens"] and s["kind"] == ms["kind"] for s in cand):
                errors.append(f"thread {ti} step {ms['step']}: tokens/kind "
                              f"{[(s['tokens'], s['kind']) for s in cand]}, minillm "
                              f"{ms['tokens']} {ms['kind']}")
    # library kernels: truth order = capture order of launches inside calls (one thread)
    if len(tids) == 1:
        tk = [t["name"] for t in truth if t.get("kind") == "kernel" and t.get("via") == "library"
              and t.get("graph_exec") is None]
        ck = [l["name"] for l in launches if "call" in l]
        if tk != ck:
            errors.append(f"library kernels: truth {len(tk)}, capture launches with a call {len(ck)}")
        lib_launch_without_call = [l for l in launches if l["via"] == "driver" and "call" not in l
                                   and ("nvjet" in l["name"] or "xmma" in l["name"] or "gemv" in l["name"])]
        if lib_launch_without_call:
            errors.append(f"{len(lib_launch_without_call)} library kernels without a call id")
    if a.experts:
        moe = json.loads(sh([a.tokprof, "moe", "--json", "--experts", str(a.experts), cap]))
        th = moe["threads"]
        if len(th) != 1:
            errors.append(f"moe: {len(th)} threads")
        else:
            ms = [m for m in mlines if m["thread"] == 0]
            if len(th[0]["steps"]) < len(ms):
                errors.append(f"moe: {len(th[0]['steps'])} steps, minillm {len(ms)}")
            got = [s["expert_load"] for s in th[0]["steps"] if s["tokens"]]
            want = [m["expert_load"] for m in ms]
            if got != want:
                for i, (g, w) in enumerate(zip(got, want)):
                    if g != w:
                        errors.append(f"moe step {i}: got {g}, want {w}")
                        break
                if len(got) != len(want):
                    errors.append(f"moe: {len(got)} steps with load, want {len(want)}")
    if "--moe-fused" in margs:
        errors += fused_errors(a, cap, launches)
    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print(f"ok: {ncalls} GEMM calls, {len(launches)} launches, token dim {gemm['token_dim']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
