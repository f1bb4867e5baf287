#!/usr/bin/env python3
"""Runs one real-client workload (workload.py: unmodified torch / transformers / Triton) on simgpu,
without and under the shim, and checks the capture against the simulator's truth.

usage: run_realstack.py --venv VENV --simgpu DIR --shim SO --tokprof EXE --workdir DIR
                        MODE [--steps N] [--procs P]

Exit 77 (ctest's skip) with one line when VENV has no torch (scripts/setup.sh creates it).
Checks, for every process that executed work (P of them; one truth log and one capture each):
  1. the program's exit status and stdout are the same without and with the shim;
  2. every kernel the simulator executed appears exactly once in the capture, with its real
     name, on its thread, in order (launches, graph replays expanded into their nodes);
  3. GPU records join every kernel and copy (tests/e2e/gpu_compare.py: exact times, the launch
     and step each belongs to, no drops, nothing unjoined);
  4. token steps = the loop's tokens: 1 prefill + N decode steps per process (N for `whole`), in
     the dump, `tokprof steps` and `tokprof summary` (TOKPROF_STEP=auto, or --step: the NVTX
     cross-checks);
  5. no kernel class is "other" but for the names that say nothing of their family (sort, scan,
     histogram, softmax: AMBIGUOUS below; tests/realstack/README.md);
  6. `tokprof summary` reads it without a warning (GPU records arrived with their steps);
  7. moe: `tokprof moe` reports no expert (the experts are CUTLASS grouped GEMMs: per-expert load
     is not observable from the host) and the grouped kernels' launches and GPU time per step.
The work directory keeps both runs' truth logs, the captures and their dumps."""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)
import overlay  # noqa: E402  (tests/realstack/overlay.py)

GPU_COMPARE = os.path.join(HERE, "..", "e2e", "gpu_compare.py")
# Generic kernels whose family depends on the caller: torch.sort/topk's sorts, cub scans, the
# histogram of tokens per expert, a softmax (attention's, the sampler's or the router's); a Triton
# kernel whose Python name is just `kernel` (vLLM's slot-mapping kernel, ComputeSlotMappingKernel);
# ggml's soft_max_f32 (attention's in a dense model, the router's in an unfused MoE).
AMBIGUOUS = re.compile(r"sort|scan|histogram|soft_?max|^kernel$", re.I)


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_workload(python, args, env, out_dir, timeout):
    p = subprocess.run([python, os.path.join(HERE, "workload.py"), *args], env=env, cwd=out_dir,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    with open(os.path.join(out_dir, "stderr.txt"), "w") as f:
        f.write(p.stderr)
    return p.returncode, p.stdout


def expected_launches(dump):
    """Per thread, the kernel names the capture's launch records predict (graphs expanded)."""
    graphs = {r["graph"]: [n["name"] for n in r["nodes"] if n.get("type") in (0, "kernel")]
              for r in dump if r["type"] == "graph"}
    out = collections.defaultdict(list)
    for r in dump:
        if r["type"] == "launch":
            out[r["tid"]].append(r["name"])
        elif r["type"] == "graph_launch":
            out[r["tid"]].extend(graphs.get(r["graph"], [f"<graph {r['graph']} without topology>"]))
    return out


def check_process(truth_path, cap, tokprof, work, want_steps, errors):
    pid = os.path.basename(cap).split(".")[-2]
    dump_path = os.path.join(work, f"dump.{pid}.jsonl")
    with open(dump_path, "w") as out:
        p = subprocess.run([tokprof, "dump", cap], stdout=out, stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        errors.append(f"tokprof dump {cap}: exit {p.returncode}: {p.stderr.strip()}")
        return
    dump, truth = load(dump_path), load(truth_path)
    # 2: every executed kernel exactly once, by name, per thread, in order
    ran = collections.defaultdict(list)
    for t in truth:
        if t["kind"] == "kernel":
            ran[t["tid"]].append(t["name"])
    launched = expected_launches(dump)
    nkernels = sum(len(v) for v in ran.values())
    for tid in sorted(set(ran) | set(launched)):
        a, e = ran.get(tid, []), launched.get(tid, [])
        if a != e:
            i = next((i for i, (x, y) in enumerate(zip(a, e)) if x != y), min(len(a), len(e)))
            errors.append(f"pid {pid} tid {tid}: {len(a)} kernels ran, the capture has {len(e)}; first "
                          f"difference at {i}: ran {a[i] if i < len(a) else None!r}, "
                          f"captured {e[i] if i < len(e) else None!r}")
    # 3: GPU records join every kernel
    g = subprocess.run([sys.executable, GPU_COMPARE, dump_path, truth_path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    if g.returncode != 0:
        errors.append(f"pid {pid}: {g.stdout.strip()}")
    # 4: token steps, as every command sees them (the reader's learned step definition, README
    # "Steps"): the dump's STEP records, `tokprof steps` and `tokprof summary`
    steps = [r for r in dump if r["type"] == "step" and r.get("kind") == "token"]
    warm = sum(1 for r in dump if r["type"] == "step" and r.get("kind") == "warmup")
    st = subprocess.run([tokprof, "steps", "--json", cap], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True, timeout=300)
    sj = subprocess.run([tokprof, "summary", "--json", cap], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True, timeout=300)
    counts = {"dump": len(steps)}
    if st.returncode == 0:
        counts["steps"] = sum(1 for s in json.loads(st.stdout)["steps"] if s["kind"] == "token")
    if sj.returncode == 0:
        counts["summary"] = json.loads(sj.stdout)["steps"]
    if len(counts) != 3 or any(v != want_steps for v in counts.values()):
        errors.append(f"pid {pid}: token steps {counts} (warm-up {warm}), the loop made {want_steps} tokens")
    # 5: classes
    k = subprocess.run([tokprof, "kernels", "--by", "name", "--json", cap], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    others = []
    if k.returncode == 0:
        rows = json.loads(k.stdout)
        rows = rows.get("rows", rows) if isinstance(rows, dict) else rows
        others = [r.get("name") for r in rows if r.get("class") == "other" and not AMBIGUOUS.search(r.get("base", ""))]
    else:
        errors.append(f"tokprof kernels: exit {k.returncode}: {k.stderr.strip()}")
    if others:
        errors.append(f"pid {pid}: {len(others)} kernel names classed 'other', e.g. {others[:3]}")
    # 6: GPU records arrive with their step (the fake CUPTI honours the shim's flush period)
    sm = subprocess.run([tokprof, "summary", cap], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        timeout=300)
    if sm.returncode != 0 or "long after" in sm.stderr:
        errors.append(f"pid {pid}: tokprof summary: exit {sm.returncode}: {sm.stderr.strip()}")
    print(f"pid {pid}: {nkernels} kernels, {len(steps)} token steps, {warm} warm-up, {gpu_line(g.stdout)}")


def check_moe(cap, tokprof, pid, want_steps, errors):
    """7: the grouped expert GEMMs are found, no expert count is made up from the cuBLAS calls
    around them (router, shared expert), and every token step has their GPU time."""
    p = subprocess.run([tokprof, "moe", "--json", cap], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    if p.returncode != 0:
        errors.append(f"pid {pid}: tokprof moe: exit {p.returncode}: {p.stderr.strip()}")
        return
    d = json.loads(p.stdout)
    fu = d.get("fused")
    if d["threads"] or not fu or fu["per_expert_observable"] is not False:
        errors.append(f"pid {pid}: tokprof moe made up experts or found no grouped kernel: "
                      f"{len(d['threads'])} threads of experts, fused {bool(fu)}")
        return
    if not any("GroupProblemShape" in k for k in fu["kernels"]):
        errors.append(f"pid {pid}: moe fused kernels {fu['kernels']}")
    steps = [s for t in fu["threads"] for s in t["steps"] if s["kernels"]]
    if len(steps) < want_steps or any(not s["gpu_ns"] for s in steps):
        errors.append(f"pid {pid}: moe: {len(steps)} steps with grouped kernels and GPU time, "
                      f"want {want_steps}")


def gpu_line(text):
    return text.strip().splitlines()[-1] if text.strip() else ""


def prepare(a, package):
    """Absolute paths in `a`, a fresh work directory and its overlay of a.venv: the overlay's
    python, or None (with the skip line printed) when the venv has no `package`."""
    for k in ("venv", "simgpu", "shim", "tokprof", "workdir"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    if not glob.glob(os.path.join(a.venv, "lib", "python3*", "site-packages", package)):
        print(f"SKIP: no {package} in {a.venv} (scripts/setup.sh creates the venv)")
        return None
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    return overlay.make(a.venv, a.simgpu, os.path.join(a.workdir, "venv"))


def process_captures(d, procs, errors):
    """(truth log, capture) of every process of run folder d that executed work; an error when
    they are not `procs`, or when one left no capture or several (hidden files count too)."""
    truths = sorted(glob.glob(os.path.join(d, "truth.*.jsonl")))
    if len(truths) != procs:
        errors.append(f"{len(truths)} processes executed work, expected {procs}")
    for t in truths:
        pid = t.split(".")[-2]
        caps = [c for c in os.listdir(d) if c.endswith(f".{pid}.tokprof")]
        if len(caps) != 1 or caps[0].startswith("."):
            errors.append(f"pid {pid} executed work but left {len(caps)} captures: {caps}")
            continue
        yield t, os.path.join(d, caps[0])


def run_env(a, name):
    """The run `name` ("plain" or "shim"): its folder (made) and environment: simgpu's libraries,
    a truth log per process, per-run compile caches, the shim preloaded for "shim"."""
    d = os.path.join(a.workdir, name)
    os.makedirs(d)
    env = dict(os.environ,
               LD_LIBRARY_PATH=a.simgpu + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else ""),
               TRITON_LIBCUDA_PATH=a.simgpu,           # Triton links its launchers against libcuda
               SIMGPU_LOG=os.path.join(d, "truth.%p.jsonl"),
               SIMGPU_UNIMPL_LOG=os.path.join(d, "unimpl.log"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(d, "inductor"),  # per test: nothing shared
               TRITON_CACHE_DIR=os.path.join(d, "triton"),
               PYTHONDONTWRITEBYTECODE="1",            # never write into the shared venv
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("LD_PRELOAD", None)
    if name == "shim":
        env["LD_PRELOAD"] = shim_preload(a.shim)
        env["TOKPROF_OUT"] = d
    return d, env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", required=True)
    ap.add_argument("--simgpu", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--tokprof", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--procs", type=int, default=1, help="processes that execute work")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--step", help="TOKPROF_STEP for the run under the shim (default: auto)")
    ap.add_argument("mode")
    a = ap.parse_args()
    python = prepare(a, "torch")
    if not python:
        return 77
    runs = {}
    for name in ("plain", "shim"):
        d, env = run_env(a, name)
        if name == "shim":
            if a.step:
                env["TOKPROF_STEP"] = a.step
            if a.step and a.step.startswith("nvtx:"):
                env["NVTX_INJECTION64_PATH"] = a.shim  # NVTX3 reaches a tool only this way
        runs[name] = run_workload(python, [a.mode, "--steps", str(a.steps)], env, d, a.timeout)
        print(f"{name}: exit {runs[name][0]}, stdout {runs[name][1].strip()!r}")
    errors = []
    if runs["plain"] != runs["shim"]:
        errors.append(f"exit/stdout differ: without the shim {runs['plain']!r}, with it {runs['shim']!r}")
    if runs["plain"][0] != 0:
        errors.append(f"the workload failed (exit {runs['plain'][0]}): see {a.workdir}/plain/stderr.txt")
    d = os.path.join(a.workdir, "shim")
    tokens = a.steps if a.mode.startswith("whole") else a.steps + 1  # whole: no separate prefill
    for t, cap in process_captures(d, a.procs, errors):
        pid = t.split(".")[-2]
        check_process(t, cap, a.tokprof, d, tokens, errors)
        if a.mode == "moe":
            check_moe(cap, a.tokprof, pid, tokens, errors)
    return verdict(errors, a.mode)


def verdict(errors, mode):
    """Prints the errors (the first 30) or "ok: MODE"; the exit status."""
    if errors:
        print("FAIL:\n" + "\n".join(errors[:30]))
        return 1
    print(f"ok: {mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
