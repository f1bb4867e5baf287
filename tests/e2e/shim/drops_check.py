#!/usr/bin/env python3
"""minillm's serving styles as fast as the simulator goes, with GPU time on: nothing is dropped.

Each run is minillm with its default sizes in SIMGPU_ZERO mode (the GPU takes no time, so the host
launches as fast as it can: the most the writer can be asked to keep up with) under the shim with
its defaults but TOKPROF_GPU=always (every step timed: the most GPU records the writer can be given;
the default, window:2/20, gives a tenth of them). The truth is the simulator's log of what it executed, written by
a second run of the same deterministic program without the shim (writing it in the captured run
would slow the launches down, and the test with them):
  - the capture has one launch record per kernel and one copy record per copy the simulator ran,
  - its GPU_INFO counts one GPU record per kernel and copy, none dropped by CUPTI,
  - `tokprof summary` says "dropped 0 records" (no ring was ever full).
The writer is woken by a ring's occupancy, not by its timer alone (record/ring.c), so this holds on
a loaded machine; loss needs the writer kept off the CPU while three quarters of a ring fill.

usage: drops_check.py MINILLM BUILD_DIR WORKDIR STEPS STYLE_ARGS..."""
import glob
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

minillm, build, work, steps = sys.argv[1:5]
style = sys.argv[5:]
tokprof = os.path.join(build, "decoder/tokprof")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
truth = os.path.join(work, "truth.jsonl")
base = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "tests/simgpu"), SIMGPU_ZERO="1")
for k in [k for k in base if k.startswith("TOKPROF_") or k in ("SIMGPU_LOG", "LD_PRELOAD")]:
    del base[k]  # the shim's defaults are what is tested, with every step's GPU time
base["TOKPROF_GPU"] = "always"
cmd = [minillm, "--steps", steps, *style]
for env in (dict(base, LD_PRELOAD=shim_preload(os.path.join(build, "shim/libtokprof.so")),
                 TOKPROF_OUT=work),
            dict(base, SIMGPU_LOG=truth)):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if p.returncode:
        print(f"FAIL: {' '.join(cmd)}: exit {p.returncode}: {p.stderr}")
        sys.exit(1)

kernels = copies = 0
with open(truth) as f:
    for line in f:
        kind = json.loads(line).get("kind")
        kernels += kind == "kernel"
        copies += kind in ("memcpy", "memset", "copy")
cap = glob.glob(os.path.join(work, "*.tokprof"))
if len(cap) != 1:
    print(f"FAIL: {len(cap)} captures in {work}")
    sys.exit(1)
s = json.loads(subprocess.run([tokprof, "summary", "--json", cap[0]], capture_output=True,
                              text=True, check=True).stdout)
text = subprocess.run([tokprof, "summary", cap[0]], capture_output=True, text=True,
                      check=True).stdout
info = [json.loads(l) for l in subprocess.run([tokprof, "dump", "--type", "gpu_info", cap[0]],
                                              capture_output=True, text=True,
                                              check=True).stdout.splitlines()]
g = info[-1] if info else {}
print(f"{' '.join(style)} --steps {steps}: truth {kernels} kernels {copies} copies; capture "
      f"{s['launches']} launches {s['copies']} copies, dropped {s['dropped']}; gpu_info "
      f"{g.get('status')} records {g.get('records')} dropped {g.get('dropped')}")
errors = []
if s["dropped"] != 0 or "dropped   0 records" not in text:
    errors.append(f"the rings dropped {s['dropped']} records")
if s["launches"] != kernels:
    errors.append(f"{s['launches']} launch records for {kernels} kernels the simulator ran")
if s["copies"] != copies:
    errors.append(f"{s['copies']} copy records for {copies} copies the simulator ran")
if g.get("status") != "on" or g.get("dropped") != 0:
    errors.append(f"GPU time not on, or CUPTI dropped records: {g}")
elif g.get("records") != kernels + copies:
    errors.append(f"{g.get('records')} GPU records for {kernels + copies} kernels and copies")
for e in errors:
    print("FAIL:", e)
sys.exit(1 if errors else 0)
