#!/usr/bin/env python3
"""minillm_compare.py must reject wrong logs: runs minillm once, then perturbs its log (one kernel
count, one name, one via expectation) and expects each comparison to fail."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
exe, simgpu, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
mlog, tlog = os.path.join(work, "m.jsonl"), os.path.join(work, "t.jsonl")
env = dict(os.environ, LD_LIBRARY_PATH=simgpu, SIMGPU_LOG=tlog)
if os.path.exists(tlog):
    os.unlink(tlog)
subprocess.run([exe, "--steps", "3", "--graphs", "--log", mlog], env=env, check=True, stdout=subprocess.DEVNULL)
cmp = [sys.executable, os.path.join(HERE, "minillm_compare.py")]
if subprocess.run(cmp + [mlog, tlog], stdout=subprocess.DEVNULL).returncode != 0:
    sys.exit("unperturbed log does not compare equal")
recs = [json.loads(l) for l in open(mlog)]


def perturbed(fn):
    r = json.loads(json.dumps(recs))
    fn(r)
    p = os.path.join(work, "bad.jsonl")
    with open(p, "w") as f:
        for x in r:
            f.write(json.dumps(x) + "\n")
    return subprocess.run(cmp + [p, tlog], stdout=subprocess.DEVNULL).returncode


def more_kernels(r):
    r[1]["kernels"] += 1


def rename(r):
    c = r[2]["kernel_counts"]
    k = sorted(c)[0]
    c[k + "_x"] = c.pop(k)


def graph_claim(r):
    r[2]["graph_kernels"] = 0


bad = [n for n, f in (("count", more_kernels), ("name", rename), ("via", graph_claim)) if perturbed(f) == 0]
if bad:
    sys.exit(f"comparison accepted perturbed logs: {bad}")
print("OK: perturbed logs rejected")
