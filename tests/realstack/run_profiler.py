#!/usr/bin/env python3
"""torch.profiler and the shim on the same run (tests/realstack/README.md, "torch.profiler"):
profiler_workload.py (the eager tiny-Llama loop under torch.profiler, its Chrome trace exported)
without and under the shim, then `tokprof import` of the trace compared with the shim's capture.

usage: run_profiler.py --venv VENV --simgpu DIR --shim SO --tokprof EXE --workdir DIR [--steps N]

Exit 77 (skip) with one line when VENV has no torch. Checks:
  1. the program's exit status and stdout are the same without and with the shim;
  2. the shim hands CUPTI over when Kineto asks for it: exactly one tokprof line on stderr, the
     capture's GPU_INFO says cupti_busy, and the trace under the shim has as many kernels, runtime
     calls and ProfilerSteps as the trace without it (torch.profiler works as without the shim);
  3. compare_profiler.py: the imported trace against the capture and the simulator's truth (the
     same kernels in the same order, the same steps, GPU times joined), and the same comparison
     with each --break must fail (the comparison can fail)."""
import argparse
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_realstack as rs  # noqa: E402

COMPARE = os.path.join(HERE, "compare_profiler.py")


def trace_counts(path):
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    c = collections.Counter(e.get("cat") for e in ev)
    steps = sum(1 for e in ev if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"))
    return {"kernel": c["kernel"], "cuda_driver": c["cuda_driver"], "ac2g": c["ac2g"], "ProfilerStep": steps}


def dump(tokprof, cap, out):
    with open(out, "w") as f:
        p = subprocess.run([tokprof, "dump", cap], stdout=f, stderr=subprocess.PIPE, text=True, timeout=300)
    return p.returncode, p.stderr.strip()


def main():
    ap = argparse.ArgumentParser()
    for k in ("venv", "simgpu", "shim", "tokprof", "workdir"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--timeout", type=int, default=600)
    a = ap.parse_args()
    python = rs.prepare(a, "torch")
    if not python:
        return 77
    runs, traces = {}, {}
    for name in ("plain", "shim"):
        d, env = rs.run_env(a, name)
        traces[name] = os.path.join(d, "trace.json")
        p = subprocess.run([python, os.path.join(HERE, "profiler_workload.py"), traces[name], "--steps", str(a.steps)],
                           env=env, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=a.timeout)
        with open(os.path.join(d, "stderr.txt"), "w") as f:
            f.write(p.stderr)
        runs[name] = (p.returncode, p.stdout, p.stderr)
        print(f"{name}: exit {p.returncode}, stdout {p.stdout.strip()!r}")
    errors = []
    if runs["plain"][:2] != runs["shim"][:2]:
        errors.append(f"exit/stdout differ: without the shim {runs['plain'][:2]!r}, with it {runs['shim'][:2]!r}")
    if runs["plain"][0] != 0:
        errors.append(f"the workload failed (exit {runs['plain'][0]}): see {a.workdir}/plain/stderr.txt")
        return rs.verdict(errors, "profiler")
    # 2. the hand-over: one warning, GPU_INFO, the profiler's trace as full as without the shim
    ours = [l for l in runs["shim"][2].splitlines() if l.startswith("tokprof[")]
    if len(ours) != 1 or "CUPTI handed over" not in ours[0]:
        errors.append(f"the shim's stderr lines: {ours!r}, want one saying CUPTI was handed over")
    want, got = trace_counts(traces["plain"]), trace_counts(traces["shim"])
    if want != got or not want["kernel"]:
        errors.append(f"torch.profiler's trace under the shim {got}, without it {want}")
    d = os.path.join(a.workdir, "shim")
    caps = list(rs.process_captures(d, 1, errors))
    if not caps:
        return rs.verdict(errors, "profiler")
    truth, cap = caps[0]
    shim_dump, imp_dump = os.path.join(d, "dump.jsonl"), os.path.join(d, "import.jsonl")
    rc, err = dump(a.tokprof, cap, shim_dump)
    if rc:
        errors.append(f"tokprof dump {cap}: exit {rc}: {err}")
    info = [json.loads(l) for l in open(shim_dump) if '"gpu_info"' in l]
    if not info or info[-1]["status"] != "cupti_busy":
        errors.append(f"the capture's GPU_INFO: {info[-1] if info else None}, want status cupti_busy")
    imp = os.path.join(d, "trace.tokprof")
    p = subprocess.run([a.tokprof, "import", traces["shim"], "-o", imp], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    print(p.stdout.strip())
    if p.returncode:
        errors.append(f"tokprof import: exit {p.returncode}")
        return rs.verdict(errors, "profiler")
    rc, err = dump(a.tokprof, imp, imp_dump)
    if rc:
        errors.append(f"tokprof dump {imp}: exit {rc}: {err}")
    # 3. the comparison, and that it can fail
    c = subprocess.run([sys.executable, COMPARE, shim_dump, imp_dump, truth], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    print(c.stdout.strip())
    if c.returncode:
        errors.append("compare_profiler.py failed (above)")
    for brk in ("drop-kernel", "merge-steps", "skew-time"):
        b = subprocess.run([sys.executable, COMPARE, shim_dump, imp_dump, truth, "--break", brk],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        if b.returncode != 1:
            errors.append(f"compare_profiler.py --break {brk}: exit {b.returncode}, want 1: {b.stdout.strip()}")
    return rs.verdict(errors, "profiler")


if __name__ == "__main__":
    sys.exit(main())
