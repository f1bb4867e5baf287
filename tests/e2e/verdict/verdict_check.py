#!/usr/bin/env python3
"""The verdict (README "Verdict", decoder/model/figures.h) against how a capture was made, and the
same word from every command that shows one.

usage: verdict_check.py --tokprof EXE make --minillm EXE --simgpu DIR --shim SO --workdir DIR
       verdict_check.py --tokprof EXE agree CAPTURE...

make: minillm (vLLM style, sync scheduling) runs three times on simgpu under the shim, each made
to be limited by one thing, and the truth is taken from outside tokprof: the simulator's truth log
(the GPU time of each decode step) and minillm's own log (when each step's tokens reached it: the
inter-token latency) and arguments (--host-us: the host's own time per step):
  gpu:    every kernel family at 50x its cost (tests/e2e/whatif/cost.txt): GPU time per step at
          least half the client's median ITL -> "gpu-bound";
  host:   --host-us 3000 at the default costs: the host's own time at least half the ITL ->
          "host-bound";
  launch: every kernel at a tenth of its default cost (cheap.txt), no --host-us: GPU time and the
          host's own time each under a quarter of the ITL; minillm does nothing on the host but
          call CUDA and cuBLAS -> "launch-bound".
A construction that misses its truth (the machine made it something else) fails as such, before
tokprof is asked. minillm runs SCHED_FIFO (chrt -f 10, as tests/e2e/whatif does; without that
right the test skips, exit 77) so that other processes on a loaded machine do not delay its
wake-ups (a late wake-up is a wait on an idle GPU, which the rule sets aside but which also
stretches the step).

agree (and make, on its captures): summary (text: within its first five lines; --json),
analyze --json, whatif --json's bound, top --once's VERDICT column and report's summary say the
same word. Exit 1 on any miss, with the numbers."""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "whatif"))
from whatif_check import run_minillm  # noqa: E402  (the same runs: SCHED_FIFO, the truth log)
import truth  # noqa: E402  (tests/simgpu/truth.py, on whatif_check's path)

STEPS = 60
HOST_US = 3000
# name: (minillm arguments, simgpu cost file or "", the truth it must have)
CASES = {
    "gpu": (["--style", "vllm", "--sched", "sync"], os.path.join(HERE, "..", "whatif", "cost.txt"),
            "gpu-bound"),
    "host": (["--style", "vllm", "--sched", "sync", "--host-us", str(HOST_US)], "", "host-bound"),
    "launch": (["--style", "vllm", "--sched", "sync"], os.path.join(HERE, "cheap.txt"), "launch-bound"),
}


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def the_truth(lines, recs, host_us):
    """(word or None, the figures): from the client's log and the simulator's, never tokprof."""
    steps = [x for x in lines if x.get("type") == "step"]
    groups, _ = truth.step_groups(recs, lines)
    gpu = []
    for _, members, _, _ in groups[2:]:  # decode steps after the first (the first ITL's end)
        busy, end = 0, 0
        for r in sorted(members, key=lambda r: r["start_ns"]):  # union of the op intervals
            s = max(r["start_ns"], end)
            if r["end_ns"] > s:
                busy += r["end_ns"] - s
            end = max(end, r["end_ns"])
        gpu.append(busy)
    itl = [(steps[i]["tok_ms"] - steps[i - 1]["tok_ms"]) * 1e6 for i in range(2, len(steps))]
    f = {"itl_p50_us": median(itl) / 1e3, "gpu_share": median(gpu) / median(itl),
         "host_share": host_us * 1e3 / median(itl)}
    if f["gpu_share"] >= 0.5 and f["host_share"] < 0.25:
        return "gpu-bound", f
    if f["host_share"] >= 0.5 and f["gpu_share"] < 0.25:
        return "host-bound", f
    if f["host_share"] < 0.25 and f["gpu_share"] < 0.25:
        return "launch-bound", f  # the program's host work is its CUDA calls
    return None, f


def tool(a, *args):
    p = subprocess.run([a.tokprof, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        sys.exit("FAIL: tokprof %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return p.stdout


def words(a, cap, wd):
    """The verdict word of every command that shows one, on capture cap."""
    out = {}
    text = tool(a, "summary", cap).splitlines()
    line = next((x for x in text[:5] if x.startswith("verdict ")), "")
    out["summary (first 5 lines)"] = line.split()[1].rstrip(":") if line else "(no verdict line)"
    s = json.loads(tool(a, "summary", "--json", cap))
    out["summary --json"] = s["verdict"]
    out["summary --json analysis"] = s["analysis"]["verdict"]
    out["analyze --json"] = json.loads(tool(a, "analyze", "--json", cap))["verdict"]
    out["whatif --json bound"] = json.loads(tool(a, "whatif", "--json", cap)).get("bound", "(no bound)")
    top = [x for x in tool(a, "top", "--once", cap).splitlines() if " pid " in x and not x.startswith(" ")]
    out["top --once"] = top[0].split()[-1] if top else "(no process row)"
    html = os.path.join(wd, "report.html")
    tool(a, "report", "-o", html, cap)
    m = re.search(r"verdict: <b>([a-z-]+)</b>", open(html).read())
    out["report"] = m.group(1) if m else "(no verdict)"
    return out, s.get("verdict_split")


def agree(a, cap, wd, want=None):
    """0 when every command says one word (want, when given); else 1, printing them."""
    w, split = words(a, cap, wd)
    said = set(w.values())
    ok = len(said) == 1 and (want is None or said == {want})
    print("%-4s %s: %s%s" % ("ok" if ok else "FAIL", os.path.basename(cap), "/".join(sorted(said)),
                             "" if want is None else " (truth: %s)" % want))
    if not ok:
        for k, v in w.items():
            print("       %-26s %s" % (k, v))
    if split:
        print("       split: " + ", ".join("%s %.1f%%" % (k, 100 * v) for k, v in split.items()))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokprof", required=True)
    sub = ap.add_subparsers(dest="mode", required=True)
    mk = sub.add_parser("make")
    for o in ("--minillm", "--simgpu", "--shim", "--workdir"):
        mk.add_argument(o, required=True)
    mk.add_argument("cases", nargs="*", default=list(CASES))
    ag = sub.add_parser("agree")
    ag.add_argument("--workdir", required=True)
    ag.add_argument("captures", nargs="+")
    a = ap.parse_args()
    bad = 0
    if a.mode == "agree":
        os.makedirs(a.workdir, exist_ok=True)
        for cap in a.captures:
            bad += agree(a, cap, a.workdir)
        return 1 if bad else 0
    if subprocess.run(["chrt", "-f", "10", "true"]).returncode:
        print("SKIP: needs SCHED_FIFO (chrt -f; root or CAP_SYS_NICE) to keep the loaded machine's noise out")
        return 77
    for name in a.cases:
        args, cost, expect = CASES[name]
        wd = os.path.join(a.workdir, name)
        lines, recs, caps = run_minillm(a, wd, args, {}, cost, STEPS)
        caps = sorted(caps)
        host_us = HOST_US if "--host-us" in args else 0
        word, f = the_truth(lines, recs, host_us)
        print("     %s: ITL p50 %.0f us, GPU %.0f%% and host's own (--host-us) %.0f%% of it (truth)" % (
            name, f["itl_p50_us"], 100 * f["gpu_share"], 100 * f["host_share"]))
        if word != expect or len(caps) != 1:
            print("FAIL %s: made to be %s, the truth says %s (%d captures)" % (name, expect, word, len(caps)))
            bad += 1
            continue
        bad += agree(a, caps[0], wd, word)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
