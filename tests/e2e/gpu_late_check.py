#!/usr/bin/env python3
"""GPU records that come long after their step (a CUPTI that hands its buffers over only when they
are full, ignoring the flush period: simgpu's SIMGPU_CUPTI=late) are counted in their launch's step exactly: every token step of an
eager minillm run has as many GPU kernels as it launched, and `tokprof summary` neither warns of
late records nor reports a GPU idle for lack of them.

usage: gpu_late_check.py MINILLM SIMGPU_DIR SHIM TOKPROF WORKDIR"""
import json
import os
import shutil
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)


def main():
    minillm, simgpu, shim, tokprof, work = sys.argv[1:6]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # 1 ms flushes: the decoder's watermark (10 flushes, 10 ms) passes a step long before its
    # records come (a 256 KiB buffer of CUPTI records holds ~12 steps, made ~40 ms by GEMMs 40x
    # slower). A ring that holds the whole run (~26k events): a writer starved by a
    # loaded machine drops nothing, so every GPU record can be joined.
    env = dict(os.environ, LD_LIBRARY_PATH=simgpu, LD_PRELOAD=shim_preload(shim), TOKPROF_OUT=work,
               TOKPROF_GPU="always", TOKPROF_FLUSH_MS="1", SIMGPU_CUPTI="late",
               TOKPROF_RING_KB="16384", SIMGPU_SLOW="nvjet:0:40")
    subprocess.run([minillm, "--style", "hf", "--steps", "120"], env=env, check=True,
                   stdout=subprocess.DEVNULL, timeout=300)
    cap = [os.path.join(work, f) for f in os.listdir(work) if f.endswith(".tokprof")]
    assert len(cap) == 1, cap
    errors = []
    loss = subprocess.run([tokprof, "dump", "--type", "loss", cap[0]], capture_output=True,
                          text=True, timeout=120, check=True).stdout
    if any(json.loads(l)["dropped"] for l in loss.splitlines() if l.strip()):
        errors.append(f"the shim dropped records (a ring too small for the run): {loss[:200]!r}")
    p = subprocess.run([tokprof, "summary", "--json", cap[0]], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0 or "long after" in p.stderr:
        errors.append(f"summary: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    p = subprocess.run([tokprof, "steps", "--json", cap[0]], capture_output=True, text=True,
                       timeout=120, check=True)
    d = json.loads(p.stdout)
    rows = [s for s in (d["steps"] if isinstance(d, dict) else d) if s.get("kind") == "token"]
    if len(rows) < 100:
        errors.append(f"{len(rows)} token steps")
    bad = [s for s in rows if s.get("gpu_kernels") != s.get("launches") or not s.get("busy_ns")
           or s.get("idle_ns", 0) >= s.get("span_ns", 1)]
    if bad:
        errors.append(f"{len(bad)} of {len(rows)} token steps lack GPU kernels, e.g. step "
                      f"{bad[0].get('seg')}: {bad[0].get('gpu_kernels')} GPU kernels, "
                      f"{bad[0].get('launches')} launches")
    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print(f"ok: {len(rows)} token steps, every GPU kernel in its launch's step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
