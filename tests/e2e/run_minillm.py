#!/usr/bin/env python3
"""Runs build/kernels/minillm on the simulated GPU and checks it against the truth log.

usage: run_minillm.py --minillm EXE --simgpu DIR --workdir DIR [--truth truth.py]
                      [--shim libtokprof.so --tokprof tokprof] -- MINILLM_ARGS

With --shim, minillm runs under LD_PRELOAD=libtokprof.so, its checks must still pass (the shim
changes nothing), and the capture is compared with the truth log (capture_compare.py).

Writes DIR/minillm.jsonl (--log) and DIR/truth.jsonl (SIMGPU_LOG), then runs minillm_compare.py
and, when tests/simgpu/truth.py exists, `truth.py check` and `truth.py steps --counts`
(one-thread runs only: truth.py groups records sequentially)."""
import argparse
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env=None):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    sys.stdout.write(p.stdout)
    return p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minillm", required=True)
    ap.add_argument("--simgpu", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--truth")
    ap.add_argument("--shim")
    ap.add_argument("--tokprof")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    margs = [x for x in a.args if x != "--"]
    os.makedirs(a.workdir, exist_ok=True)
    mlog = os.path.join(a.workdir, "minillm.jsonl")
    tlog = os.path.join(a.workdir, "truth.jsonl")
    for f in (mlog, tlog):
        if os.path.exists(f):
            os.unlink(f)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = a.simgpu + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["SIMGPU_LOG"] = tlog
    if a.shim:
        for f in os.listdir(a.workdir):
            if f.endswith(".tokprof"):
                os.unlink(os.path.join(a.workdir, f))
        env["LD_PRELOAD"] = shim_preload(a.shim)
        env["TOKPROF_OUT"] = a.workdir
    if run([a.minillm, *margs, "--log", mlog], env) != 0:
        print("FAIL: minillm exited non-zero")
        return 1
    if run([sys.executable, os.path.join(HERE, "minillm_compare.py"), mlog, tlog]) != 0:
        return 1
    threads = 1
    if "--threads" in margs:
        threads = int(margs[margs.index("--threads") + 1])
    if a.truth and os.path.exists(a.truth):
        if run([sys.executable, a.truth, "check", tlog]) != 0:
            print("FAIL: truth.py check")
            return 1
        if threads == 1 and run([sys.executable, a.truth, "steps", "--counts", mlog, tlog]) != 0:
            print("FAIL: truth.py steps --counts")
            return 1
    else:
        print(f"note: {a.truth} not found; truth.py check / steps skipped")
    if a.shim:
        caps = [f for f in os.listdir(a.workdir) if f.endswith(".tokprof")]
        if len(caps) != 1:
            print(f"FAIL: expected one capture in {a.workdir}, found {caps}")
            return 1
        dump = os.path.join(a.workdir, "dump.jsonl")
        with open(dump, "w") as out:
            p = subprocess.run([a.tokprof, "dump", os.path.join(a.workdir, caps[0])], stdout=out,
                               stderr=subprocess.PIPE, text=True, timeout=120)
        if p.returncode != 0:
            print(f"FAIL: tokprof dump exited {p.returncode}: {p.stderr}")
            return 1
        if run([sys.executable, os.path.join(HERE, "capture_compare.py"), dump, tlog, mlog]) != 0:
            return 1
        # tier 2: simgpu's fake libcupti.so.13 is on the library path, so GPU time is on
        if run([sys.executable, os.path.join(HERE, "gpu_compare.py"), dump, tlog]) != 0:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
