#!/usr/bin/env python3
"""GPU time (tier 2) modes and failing soft, on simgpu with its fake libcupti.so.13.

  window   TOKPROF_GPU=window:2/10: gpu_kernel records exist for exactly the steps s with
           s % 10 < 2 that launched kernels (steps are the stepping thread's segments), and
           every copy of those steps has its GPU record, the copy that ends a window's last
           step included (it is issued after the boundary was detected);
  default  TOKPROF_GPU unset (ctest's environment sets always: removed here): the production
           default, window:2/20 — GPU records for exactly the steps s % 20 < 2, and gpu_info
           says the mode;
  trigger  TOKPROF_GPU=trigger, TOKPROF_GPU_TRIGGER_STEPS=5, one SIGUSR2 mid-run: exactly one
           run of 5 consecutive steps is traced, nothing else;
  busy     SIMGPU_CUPTI=multiple_subscribers (CUPTI taken, as under nsys): minillm's stdout and
           exit code are unchanged, stderr gains exactly one tokprof line, the capture has all
           its launches and a gpu_info saying cupti_busy; the same for SIMGPU_CUPTI=unknown
           (no GPU) and TOKPROF_GPU=off (no warning then).

usage: gpu_modes_check.py MINILLM SIMGPU_DIR SHIM TOKPROF WORKDIR
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)


def dump(tokprof, work):
    caps = [f for f in os.listdir(work) if f.endswith(".tokprof")]
    assert len(caps) == 1, caps
    out = subprocess.run([tokprof, "dump", os.path.join(work, caps[0])], capture_output=True,
                         text=True, check=True).stdout
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def run(a, name, env_extra, args, sig_after=None):
    work = os.path.join(a["work"], name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, LD_LIBRARY_PATH=a["simgpu"], LD_PRELOAD=shim_preload(a["shim"]),
               TOKPROF_OUT=work)
    env.update(env_extra)
    env = {k: v for k, v in env.items() if v is not None}  # None: unset
    p = subprocess.Popen([a["minillm"]] + args, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if sig_after is not None:
        time.sleep(sig_after)
        p.send_signal(signal.SIGUSR2)
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err, dump(a["tokprof"], work)


def copies_untimed(recs, steps):
    """The host copies of `steps` without a GPU record (joined by step and ordinal)."""
    host, gpu = {}, set()
    for r in recs:
        if r["type"] == "copy" and r["step"] in steps:
            host[r["step"]] = host.get(r["step"], 0) + 1
        elif r["type"] in ("gpu_copy", "gpu_memset") and r.get("join") == "copy":
            gpu.add((r["step"], r["index"]))
    return [(s, i) for s, n in sorted(host.items()) for i in range(n) if (s, i) not in gpu]


def main():
    a = dict(zip(["minillm", "simgpu", "shim", "tokprof", "work"], sys.argv[1:6]))
    errors = []

    # window
    rc, _, _, recs = run(a, "window", {"TOKPROF_GPU": "window:2/10"}, ["--steps", "35"])
    traced = {r["step"] for r in recs if r["type"] == "gpu_kernel"}
    launched = {r["step"] for r in recs if r["type"] in ("launch", "graph_launch")}
    want = {s for s in launched if s % 10 < 2}
    if rc or traced != want:
        errors.append(f"window:2/10: traced steps {sorted(traced)}, want {sorted(want)} (rc {rc})")
    lost = copies_untimed(recs, want)
    if lost or not any(r["type"] == "gpu_copy" for r in recs):
        errors.append(f"window:2/10: copies of traced steps without a GPU record (step, ordinal): {lost}")

    # default (unset)
    rc, _, _, recs = run(a, "default", {"TOKPROF_GPU": None}, ["--steps", "45"])
    traced = {r["step"] for r in recs if r["type"] == "gpu_kernel"}
    launched = {r["step"] for r in recs if r["type"] in ("launch", "graph_launch")}
    want = {s for s in launched if s % 20 < 2}
    modes = {r["mode"] for r in recs if r["type"] == "gpu_info"}
    if rc or traced != want or modes != {"window:2/20"}:
        errors.append(f"default: traced steps {sorted(traced)}, want {sorted(want)}; gpu_info "
                      f"modes {modes} (rc {rc})")
    lost = copies_untimed(recs, want)
    if lost:
        errors.append(f"default: copies of traced steps without a GPU record (step, ordinal): {lost}")

    # trigger
    rc, _, _, recs = run(a, "trigger", {"TOKPROF_GPU": "trigger", "TOKPROF_GPU_TRIGGER_STEPS": "5"},
                         ["--steps", "4000"], sig_after=0.3)
    traced = sorted({r["step"] for r in recs if r["type"] == "gpu_kernel"})
    if rc or not traced or traced != list(range(traced[0], traced[0] + 5)):
        errors.append(f"trigger: traced steps {traced}, want 5 consecutive (rc {rc})")

    # failing soft
    base = subprocess.run([a["minillm"], "--steps", "4"], capture_output=True, text=True,
                          env=dict(os.environ, LD_LIBRARY_PATH=a["simgpu"]))
    for name, env, status, lines in (("busy", {"SIMGPU_CUPTI": "multiple_subscribers"}, "cupti_busy", 1),
                                     ("nogpu", {"SIMGPU_CUPTI": "unknown"}, "no_gpu", 1),
                                     ("off", {"TOKPROF_GPU": "off"}, "off", 0)):
        rc, out, err, recs = run(a, name, env, ["--steps", "4"])
        ours = [l for l in err.splitlines() if l.startswith("tokprof[")]
        info = [r for r in recs if r["type"] == "gpu_info"]
        nlaunch = sum(r["type"] == "launch" for r in recs)
        if rc != base.returncode or out.split("\n")[:-3] != base.stdout.split("\n")[:-3]:
            errors.append(f"{name}: minillm output or exit code changed")
        if len(ours) != lines:
            errors.append(f"{name}: {len(ours)} tokprof lines on stderr, want {lines}: {ours}")
        if not info or info[-1]["status"] != status:
            errors.append(f"{name}: gpu_info {info[-1:] }, want status {status}")
        if not nlaunch or any(r["type"] == "gpu_kernel" for r in recs):
            errors.append(f"{name}: {nlaunch} launches (tier 1 must go on), GPU records present?")

    if errors:
        print("FAIL:\n" + "\n".join(errors))
        return 1
    print("GPU modes: window, default (window:2/20), trigger, busy/no-GPU/off fail soft: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
