#!/usr/bin/env python3
"""Launch templates past the writer's table (TKP_TMPL_MAX): every launch decodes with its exact
name and configuration, in order, whether the writer encoded it by template or in full.

usage: configs_check.py PROGRAM BUILD_DIR WORKDIR N"""
import json, os, shutil, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import capture_one  # noqa: E402  (tests/preload.py)

prog, build, work, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
cap = capture_one(build, work, [prog, str(n)],
                  dict(TOKPROF_GPU="off", SIMGPU_ZERO="1", TOKPROF_RING_KB="65536",
                       TOKPROF_FLUSH_MS="50"))
out = subprocess.run([os.path.join(build, "decoder/tokprof"), "dump", "--type", "launch", cap],
                     capture_output=True, text=True, check=True).stdout
got = [(l["name"], tuple(l["grid"]), tuple(l["block"]), l["smem"])
       for l in map(json.loads, out.splitlines())]
want = [("k_a", (i + 1, 1, 1), (32, 1, 1), 0) for i in range(n)] + \
       [("k_a", (i + 1, 1, 1), (32, 1, 1), 0) for i in range(100)] + \
       [("k_b", (i + 1, 2, 3), (16, 2, 2), 128) for i in range(100)]
summary = json.loads(subprocess.run([os.path.join(build, "decoder/tokprof"), "summary", "--json", cap],
                                    capture_output=True, text=True, check=True).stdout)
if summary.get("dropped", 0):
    print(f"FAIL: the shim dropped {summary['dropped']} records (rings too small?)")
    sys.exit(1)
if got != want:
    bad = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
        if any(g != w for g, w in zip(got, want)) else min(len(got), len(want))
    print(f"FAIL: {len(got)} launches decoded, {len(want)} made; first difference at {bad}: "
          f"{got[bad] if bad < len(got) else None} vs {want[bad] if bad < len(want) else None}")
    sys.exit(1)
print(f"ok: {len(got)} launches, {n + 100} distinct configurations, all exact")
