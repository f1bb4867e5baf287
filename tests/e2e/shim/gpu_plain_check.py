#!/usr/bin/env python3
"""GPU records written one by one (TOKPROF_TEST_GPU=plain: the writer's path when it has no
memory for columns, docs/FORMAT.md "GPU templates") decode to the simulator's truth: gpu_compare.py
(every kernel, copy and memset once, exact times, joined to its launch or graph node) and a
complete capture. A GPU_KERNEL is 18 msgpack elements, a GPU_COPY 14: the two array headers.

usage: gpu_plain_check.py BUILD_DIR WORKDIR"""
import json, os, shutil, subprocess, sys
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from preload import capture_one  # noqa: E402  (tests/preload.py)

build, work = sys.argv[1:3]
tokprof = os.path.join(build, "decoder/tokprof")
shutil.rmtree(work, ignore_errors=True)
fails = []
for name, style in (("eager", ["--style", "vllm"]),
                    ("async_graphs", ["--style", "vllm", "--sched", "async", "--graphs"])):
    d = os.path.join(work, name)
    os.makedirs(d)
    truth = os.path.join(d, "truth.jsonl")
    cap = capture_one(build, d, [os.path.join(build, "kernels/minillm"), *style, "--steps", "40"],
                      dict(TOKPROF_GPU="always", TOKPROF_TEST_GPU="plain", SIMGPU_LOG=truth))
    summ = json.loads(subprocess.run([tokprof, "summary", "--json", cap], check=True,
                                     capture_output=True, text=True).stdout)
    if not summ["complete"] or not summ["gpu"]["available"]:
        fails.append(f"{name}: complete {summ['complete']} ({summ['stopped_why']}), GPU "
                     f"{summ['gpu']['reason']}")
        continue
    dump = os.path.join(d, "dump.jsonl")
    with open(dump, "w") as f:
        subprocess.run([tokprof, "dump", cap], check=True, stdout=f)
    g = subprocess.run([sys.executable, os.path.join(HERE, "..", "gpu_compare.py"), dump, truth],
                       capture_output=True, text=True, timeout=120)
    if g.returncode:
        fails.append(f"{name}: gpu_compare: {g.stdout.strip()[:2000]}")
    else:
        print(f"{name}: {g.stdout.strip().splitlines()[-1] if g.stdout.strip() else 'ok'}")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
