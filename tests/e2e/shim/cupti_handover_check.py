#!/usr/bin/env python3
"""The shim hands CUPTI over to a client the program registers mid-run (cupti_handover.c, as
torch.profiler does): the program's output and exit status are the same without and with the
shim (its own client gets its 2 kernels either way), the shim says so in exactly one stderr line,
its capture keeps the 5 launches and the GPU records of the 3 kernels before the hand-over, all
joined, and GPU_INFO says cupti_busy. `early`: the program's client comes before capture starts;
the shim never takes CUPTI from it (its client gets all 5 kernels; one line, no GPU record).

usage: cupti_handover_check.py PROGRAM SIMGPU_DIR SHIM TOKPROF WORKDIR [early]"""
import json
import os
import shutil
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)


def main():
    prog, simgpu, shim, tokprof, work = sys.argv[1:6]
    early = sys.argv[6:7] == ["early"]
    args = [prog] + (["early"] if early else [])
    want_line, want_gpu = ("CUPTI is taken", 0) if early else ("CUPTI handed over", 3)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, LD_LIBRARY_PATH=simgpu)
    env.pop("LD_PRELOAD", None)
    plain = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    env.update(LD_PRELOAD=shim_preload(shim), TOKPROF_OUT=work)
    under = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    errors = []
    if (plain.returncode, plain.stdout) != (under.returncode, under.stdout) or plain.returncode:
        errors.append(f"without the shim {plain.returncode} {plain.stdout!r}, with it "
                      f"{under.returncode} {under.stdout!r}")
    ours = [l for l in under.stderr.splitlines() if l.startswith("tokprof[")]
    if len(ours) != 1 or want_line not in ours[0]:
        errors.append(f"the shim's stderr lines: {ours!r}")
    caps = [f for f in os.listdir(work) if f.endswith(".tokprof")]
    if len(caps) != 1:
        errors.append(f"captures: {caps}")
    else:
        out = subprocess.run([tokprof, "dump", os.path.join(work, caps[0])], capture_output=True, text=True,
                             check=True).stdout
        d = [json.loads(l) for l in out.splitlines() if l.strip()]
        launches = sum(r["type"] == "launch" for r in d)
        gpu = [r for r in d if r["type"] == "gpu_kernel"]
        info = [r for r in d if r["type"] == "gpu_info"]
        if launches != 5 or len(gpu) != want_gpu or any(r.get("join") != "launch" for r in gpu):
            errors.append(f"capture: {launches} launches, {len(gpu)} GPU kernel records "
                          f"({[r.get('join') for r in gpu]}), want 5 and {want_gpu} joined")
        if not info or info[-1]["status"] != "cupti_busy":
            errors.append(f"GPU_INFO {info[-1] if info else None}, want cupti_busy")
    if errors:
        print("FAIL:\n" + "\n".join(errors))
        return 1
    print(f"ok: {under.stdout.strip()}; {ours[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
