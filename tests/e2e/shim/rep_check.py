#!/usr/bin/env python3
"""REP records end to end (docs/FORMAT.md, "Repeats"): minillm on simgpu, captured by the shim with
TOKPROF_TEST_REP=shadow, which follows each REP with a record (type 34, skipped by readers) holding
the very records the REP stands for, packed as the shim packs them without REPs. `unrep` rewrites
the capture with each REP replaced by those records. Both captures must decode to the same records,
every field of every record (`tokprof dump --raw`, the chunks' file offsets aside), and the
capture must hold REPs (else nothing was compared). Configurations: the serving styles, graphs
(a step's short runs go into REPs), two threads, GPU records on (COLS between groups), sampled
stacks (LAUNCH_T records of their own), several chunks.

With `gpu` (e2e_shim_gpu_run_same_records): GPU templates (FORMAT.md "GPU templates", format
v6), TOKPROF_GPU=always and TOKPROF_TEST_GPU=shadow, which follows each GPU_RUN with a record of
type 34 holding the same kernels as the COLS of format 5 (its own encoder, its NAME lookup per
record); `unrep ... gpu` puts that COLS in the GPU_RUN's place. Configurations: the serving
styles, sync and async, graphs (one correlation per replay), two threads.

usage: rep_check.py BUILD_DIR UNREP WORKDIR [gpu]"""
import os, re, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import capture_one, format_version  # noqa: E402  (tests/preload.py)

build, unrep, work = sys.argv[1:4]
gpu = sys.argv[4:] == ["gpu"]
tokprof = os.path.join(build, "decoder/tokprof")
shutil.rmtree(work, ignore_errors=True)
fails = []

CONFIGS = {
    "vllm": (["--style", "vllm"], {}),
    "hf": (["--style", "hf"], {}),
    "graphs": (["--style", "vllm", "--graphs"], {}),
    "async_graphs_gpu": (["--style", "vllm", "--sched", "async", "--graphs"],
                         {"TOKPROF_GPU": "always"}),
    "threads": (["--style", "hf", "--threads", "2", "--layers", "2"], {}),
    "stacks": (["--style", "vllm", "--layers", "2"], {"TOKPROF_STACKS": "sample:7"}),
}
if gpu:
    CONFIGS = {name: (args, {"TOKPROF_GPU": "always", "TOKPROF_TEST_GPU": "shadow",
                             "TOKPROF_TEST_REP": "on"}) for name, args in (
        ("vllm", ["--style", "vllm"]), ("hf", ["--style", "hf"]),
        ("vllm_async", ["--style", "vllm", "--sched", "async"]),
        ("graphs", ["--style", "vllm", "--graphs"]),
        ("async_graphs", ["--style", "vllm", "--sched", "async", "--graphs"]),
        ("threads", ["--style", "hf", "--threads", "2", "--layers", "2"]))}
what = "GPU_RUN" if gpu else "REP"


def dump(cap):
    d = subprocess.run([tokprof, "dump", "--raw", cap], capture_output=True, text=True, timeout=300)
    if d.returncode:
        sys.exit(f"FAIL: tokprof dump {cap}: exit {d.returncode}: {d.stderr}")
    return [re.sub(r',"offset":\d+', "", line) for line in d.stdout.splitlines()]


for name, (args, extra) in CONFIGS.items():
    cap = capture_one(build, os.path.join(work, name),
                      [os.path.join(build, "kernels/minillm"), "--steps", "200"] + args,
                      dict(dict(TOKPROF_GPU="off", TOKPROF_TEST_REP="shadow", TOKPROF_FLUSH_MS="20",
                                TOKPROF_RING_KB="8192"), **extra))
    version = format_version(cap)
    if version != 6:
        fails.append(f"{name}: format version {version}, expected 6")
    plain = os.path.join(work, name + ".plain.tokprof")
    u = subprocess.run([unrep, cap, plain] + (["gpu"] if gpu else []), capture_output=True,
                       text=True, timeout=120)
    if u.returncode:
        fails.append(f"{name}: unrep exit {u.returncode} ({u.stderr.strip() or 'no REP'})")
        continue
    a, b = dump(cap), dump(plain)
    if a != b:
        diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        fails.append(f"{name}: {len(a)} records with {what}s, {len(b)} without; first difference at "
                     f"{diff}:\n  {a[diff] if diff < len(a) else '(end)'}\n  "
                     f"{b[diff] if diff < len(b) else '(end)'}")
    chunks = sum(1 for line in a if line.startswith('{"type":"chunk"'))
    print(f"{name}: {len(a)} records, {chunks} chunks, {u.stdout.strip()} {what}s, same records")

if fails:
    print("FAIL:\n" + "\n".join(fails))
    sys.exit(1)
print("PASS")
