#!/usr/bin/env python3
"""Compares a torch.profiler (Kineto) trace, imported by `tokprof import`, with the shim's capture
of the same run and the simulator's truth (run_profiler.py runs them).

usage: compare_profiler.py SHIM_DUMP IMPORT_DUMP TRUTH [--break KIND]

The three are JSON lines: `tokprof dump` of the shim's capture, of the imported trace, and the
truth log. Checks:
  1. kernels: the imported launches' names, in order, are the shim's launches' names (the shim
     records mangled names, Kineto writes them demangled: c++filt, as Kineto's __cxa_demangle),
     and the simulator executed those kernels in that order;
  2. steps: as many ProfilerStep ranges in the trace as token steps in the shim's capture
     (TOKPROF_STEP=auto), with the same launches in each;
  3. GPU times: the trace's kernel i (joined to its launch by correlation id in the import) is
     the shim's launch i; its duration is the simulator's, and its start is too once the trace's
     clock is put on the simulator's by one offset (Kineto's clock is its own: TSC or realtime);
     tolerance 2 ns + 1e-4 of the time since the first kernel (the fake CUPTI maps the simulated
     clock onto Kineto's through a rate measured over 10 ms, tests/simgpu/README.md); and each
     kernel starts after the shim saw its launch (both on CLOCK_MONOTONIC).
--break drop-kernel|merge-steps|skew-time damages the imported side on purpose: the comparison
must then fail (run_profiler.py checks that it does)."""
import argparse
import json
import subprocess
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def demangle(names):
    p = subprocess.run(["c++filt"], input="\n".join(names) + "\n", stdout=subprocess.PIPE, text=True, check=True)
    return p.stdout.split("\n")[:len(names)]


def first_diff(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shim")
    ap.add_argument("imported")
    ap.add_argument("truth")
    ap.add_argument("--break", dest="brk", choices=["drop-kernel", "merge-steps", "skew-time"])
    a = ap.parse_args()
    shim, imp, truth = load(a.shim), load(a.imported), load(a.truth)
    errors = []
    s_launch = [r for r in shim if r["type"] == "launch"]
    i_launch = [r for r in imp if r["type"] == "launch"]
    # a GPU record joins the launch of its (thread, step, ordinal in the step) (docs/FORMAT.md)
    by_key = {(r["tid"], r["step"], r["index"]): r for r in imp if r["type"] == "gpu_kernel" and r.get("join") == "launch"}
    per_step, i_gpu = {}, {}
    for i, r in enumerate(r for r in imp if r["type"] == "launch"):
        k = (r["tid"], r["step"])
        if (k + (per_step.get(k, 0),)) in by_key:
            i_gpu[i] = by_key[k + (per_step.get(k, 0),)]
        per_step[k] = per_step.get(k, 0) + 1
    t_kern = [r for r in truth if r["kind"] == "kernel"]
    s_steps = [r for r in shim if r["type"] == "step" and r["kind"] == "token"]
    i_steps = [r for r in imp if r["type"] == "step" and r["kind"] == "token"]
    if a.brk == "drop-kernel":
        i_launch = i_launch[:len(i_launch) // 2] + i_launch[len(i_launch) // 2 + 1:]
    elif a.brk == "merge-steps":
        i_steps = i_steps[:1] + [dict(i_steps[1], launches=i_steps[1]["launches"] + i_steps[2]["launches"])] + i_steps[3:]
    elif a.brk == "skew-time":
        mid = len(i_gpu) // 2
        i_gpu[mid] = dict(i_gpu[mid], end_ns=i_gpu[mid]["end_ns"] + 5)

    # 1. the same kernels in the same order; the window: the shim's launches from the first one
    # the trace has (the profile starts after the model is loaded)
    names = demangle([r["name"] for r in s_launch])
    want = [r["name"] for r in i_launch]
    k0 = next((k for k in range(len(names)) if names[k:k + len(want)] == want), None)
    if k0 is None:
        i = first_diff(names[len(names) - len(want):], want)
        errors.append(f"kernels: the trace's {len(want)} launches are not a run of the shim's {len(names)}; "
                      f"aligned at the end, first difference at {i}: shim "
                      f"{names[len(names) - len(want) + i][:80] if i < len(want) else None!r}, trace "
                      f"{want[i][:80] if i < len(want) else None!r}")
        k0 = len(names) - len(want)
    ran = demangle([r["name"] for r in t_kern])
    if ran[k0:k0 + len(want)] != want:
        errors.append("kernels: the simulator did not execute the trace's kernels in its order")

    # 2. the same steps: ProfilerStep ranges vs the shim's auto token steps, launches per step
    s_in = [s for s in s_steps if s["launches"]]
    s_counts = [s["launches"] for s in s_in][-len(i_steps):] if i_steps else []
    i_counts = [s["launches"] for s in i_steps]
    if len(i_steps) != len(s_in) or s_counts != i_counts:
        errors.append(f"steps: the trace has {len(i_steps)} ProfilerSteps with launches {i_counts[:8]}..., the "
                      f"shim {len(s_in)} token steps with launches {[s['launches'] for s in s_in][:8]}...")

    # 3. GPU times joined to the shim's launches
    n = min(len(want), len(i_launch))
    if len(i_gpu) != len(i_launch) and not errors:
        errors.append(f"gpu: {len(i_gpu)} kernels joined to {len(i_launch)} launches in the import")
    offset = None
    worst_dur = worst_start = 0
    late = 0
    for i in range(n):
        g, t, s = i_gpu.get(i), t_kern[k0 + i] if k0 + i < len(t_kern) else None, s_launch[k0 + i]
        if g is None or t is None:
            errors.append(f"gpu: launch {i} has no kernel in the trace or the truth")
            break
        if offset is None:
            offset, t0 = t["start_ns"] - g["start_ns"], t["start_ns"]
        tol = 2 + 1e-4 * (t["start_ns"] - t0)
        dd = (g["end_ns"] - g["start_ns"]) - (t["end_ns"] - t["start_ns"])
        ds = g["start_ns"] + offset - t["start_ns"]
        worst_dur, worst_start = max(worst_dur, abs(dd)), max(worst_start, abs(ds))
        if abs(dd) > 2 + 1e-4 * (t["end_ns"] - t["start_ns"]) or abs(ds) > tol:
            errors.append(f"gpu: kernel {i} {want[i][:60]!r}: the trace's duration is {dd:+d} ns and its start "
                          f"{ds:+d} ns off the simulator's")
            break
        if s["host_ns"] > g["start_ns"] + offset:
            late += 1
    if late:
        errors.append(f"gpu: {late} kernels start before the shim saw their launch")
    if errors:
        print("FAIL:\n" + "\n".join(errors[:20]))
        return 1
    print(f"ok: {len(want)} kernels in order (shim launches {k0}..{k0 + len(want) - 1}), "
          f"{len(i_steps)} ProfilerSteps = {len(s_in)} token steps, GPU times joined: "
          f"durations within {worst_dur} ns, starts within {worst_start} ns of the simulator's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
