#!/usr/bin/env python3
"""64 threads' first launches at once under TOKPROF_STEP=kernel:RE or nvtx:RE (first_launch.c), or
with GPU time on (MODE gpu).

usage: first_launch_check.py PROGRAM SHIM TOKPROF SIMGPU_DIR WORKDIR MODE THREADS STEPS

The program must exit 0 with nothing on stderr: in the ThreadSanitizer build (TOKPROF_TSAN, where
ctest sets TSAN_OPTIONS with exitcode=66) a data race in the shim is a report on stderr and exit
66 — issue 33's races: the step detector compiled its regex lazily on whichever application
threads reached their first launch together; the hooks' lazily resolved real functions were plain
pointers that those threads all wrote. Then, with a step regex, the capture must hold THREADS x
STEPS token steps of 3 launches each: each thread found every one of its steps.

MODE gpu: TOKPROF_GPU=always on simgpu's CUPTI, and a ring budget no ring fits in
(TOKPROF_BUFFER_MB=1, TOKPROF_RING_KB=2048), so that no ring publication orders the application
threads before the writer: the writer's GPU_INFO reads the tier's status (every 1 ms,
TOKPROF_FLUSH_MS=1) while the starting thread's tkp_cupti_start sets it after the writer has
started — issue 33's third race, a report in the TSan build on the old code. The capture must
hold GPU_INFO "on", one GPU kernel record per launch the program made (THREADS x STEPS x 3, the
simulator's), and every launch counted lost (no ring); stderr holds the shim's one line saying
that a thread got no ring, and nothing else."""
import glob, json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)

prog, shim, tokprof, sim, work, mode = sys.argv[1:7]
threads, steps = int(sys.argv[7]), int(sys.argv[8])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ, LD_LIBRARY_PATH=sim, LD_PRELOAD=shim_preload(shim), TOKPROF_OUT=work,
           TOKPROF_STEP=mode, NVTX_INJECTION64_PATH=shim, TOKPROF_GPU="off", SIMGPU_ZERO="1",
           TOKPROF_RING_KB="256")
gpu = mode == "gpu"
if gpu:
    del env["TOKPROF_STEP"]
    env.update(TOKPROF_GPU="always", TOKPROF_BUFFER_MB="1", TOKPROF_RING_KB="2048",
               TOKPROF_FLUSH_MS="1")
args = [prog, str(threads), str(steps)] + (["nvtx"] if mode.startswith("nvtx:") else [])
p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=240)
# MODE gpu: the shim's one warning that a thread got no ring (ring.c) is expected, nothing else
err = "".join(l + "\n" for l in p.stderr.splitlines() if not (gpu and "gets no ring" in l))
if p.returncode != 0 or err:
    print(f"FAIL: {mode}: program exit {p.returncode}, stderr:\n{p.stderr[-6000:]}")
    sys.exit(1)
caps = glob.glob(os.path.join(work, "*.tokprof"))
if len(caps) != 1:
    print(f"FAIL: want one capture, got {caps}")
    sys.exit(1)
dump = subprocess.run([tokprof, "dump", caps[0]], capture_output=True, text=True, check=True).stdout
recs = [json.loads(line) for line in dump.splitlines()]
if gpu:
    launches = threads * steps * 3
    infos = [r for r in recs if r["type"] == "gpu_info"]
    kernels = sum(r["type"] == "gpu_kernel" for r in recs)
    losses = [r["dropped"] for r in recs if r["type"] == "loss"]
    lost = max(losses, default=0)  # threads without a ring: one running count
    status = infos[-1]["status"] if infos else None
    print(f"gpu: {threads} threads, GPU_INFO {status}, {kernels} GPU kernel records, {lost} lost "
          f"of {launches} launches")
    if status != "on" or kernels != launches or lost < launches:
        print(f"FAIL: want GPU_INFO on, {launches} GPU kernel records and {launches} lost")
        sys.exit(1)
    sys.exit(0)
per_seg = {}
for r in recs:
    if r["type"] == "launch":
        key = (r["tid"], r["step"])
        per_seg[key] = per_seg.get(key, 0) + 1
tokens = [r for r in recs if r["type"] == "step" and r["kind"] == "token"]
sizes = sorted({per_seg.get((r["tid"], r["step"]), 0) for r in tokens})
by_thread = {}
for r in tokens:
    by_thread[r["tid"]] = by_thread.get(r["tid"], 0) + 1
print(f"{mode}: {threads} threads, {len(tokens)} token steps on {len(by_thread)} threads, "
      f"launches per step {sizes}")
if len(tokens) != threads * steps or sizes != [3] or sorted(set(by_thread.values())) != [steps]:
    print(f"FAIL: want {threads * steps} token steps ({steps} on each of {threads} threads) of "
          f"3 launches each")
    sys.exit(1)
