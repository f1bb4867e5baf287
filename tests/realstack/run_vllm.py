#!/usr/bin/env python3
"""Runs a vLLM workload (vllm_workload.py) on simgpu without and under the shim and checks the
capture against the simulator's truth and against vLLM's own step log (vllm_probe.py).

usage: run_vllm.py --venv VENV --simgpu DIR --shim SO --tokprof EXE --workdir DIR
                   [--reqs 8] [--tokens 64] [--graphs] [--async-sched on|off] [--serve] [--nvtx]
                   [--prompt-lens 9,10,11,12,13] [--capture-sizes 1,2,4,8,64] [--v2]

--serve: `vllm serve` (async scheduling, vLLM's default) with --reqs concurrent streaming
completions over HTTP to 127.0.0.1 and a SIGTERM at the end, the run under the shim started as
`tokprof run -o DIR --shim SO -- python vllm_workload.py serve ...`.

--nvtx: vLLM's own NVTX ranges as the exact step source: VLLM_NVTX_SCOPES_FOR_PROFILING=1 in both
runs and, under the shim, TOKPROF_STEP=nvtx:^gpu_model_runner: forward$ with NVTX_INJECTION64_PATH
naming the shim (one token step per model forward; README.md, "Steps").

--v2: vLLM 0.33's default Model Runner V2 (VLLM_USE_V2_MODEL_RUNNER left unset; without --v2 the
V1 runner, =0). V2 copies the number of tokens each request sampled back from the device; the
Triton kernel that computes it (_get_num_sampled_and_rejected_kernel, parameter 0) is given a
host-visible effect on simgpu: it writes 1 per request (SIMGPU_WRITES, tests/simgpu/README.md,
"Kernel writes"), what it computes for a request that is not in a chunked prefill (the workload
never chunks: 64 prompt tokens, max_num_batched_tokens 256).

Exit 77 (ctest's skip) with one line when VENV has no vllm (scripts/setup.sh creates it).
Checks, in the run under the shim:
  1. exit 0 without and with the shim, and the same result line (requests, tokens per request);
  2. for every process that executed work (its truth log): every kernel exactly once, in order,
     per thread; GPU records join every kernel and copy; no kernel classed "other" but for the
     ambiguous names; `tokprof summary` without a warning (run_realstack.check_process);
  3. token steps = the steps vLLM's scheduler ran (schedule() with tokens > 0, from the probe);
  4. tokens per step = the tokens vLLM scheduled in that step, step by step (`tokprof steps`),
     or unknown (null: a forward in piecewise graphs), never another number; the summary's
     tokens_unknown_steps counts the unknown ones;
  5. --moe: `tokprof moe` finds vLLM's fused_moe_kernel and reports no per-expert load (it is
     routed on the GPU inside the kernel);
  6. inter-token latency: tokprof's p50 within 10 % of vLLM's (the differences of the probe's
     "output" stamps, the stamps vLLM's inter_token_latency metric is made of).
Prints one line per figure for docs/VALIDATION.md."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run_realstack  # noqa: E402

RESULT = "requests "
NVTX_STEP = "nvtx:^gpu_model_runner: forward$"  # one range per model forward (vllm/v1/worker/gpu_model_runner.py)
# Model Runner V2 (vllm/v1/worker/gpu/input_batch.py): num_sampled (parameter 0, int32, one per
# request = grid x) starts as ones and the kernel zeroes the rows still in a chunked prefill
V2_WRITES = "_get_num_sampled_and_rejected_kernel:0:i32:1"


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0.0


def probe_steps(path):
    """vLLM's steps that ran the model: tokens scheduled, and the ITLs (s) of its output stamps."""
    recs = [json.loads(l) for l in open(path)]
    tokens = [r["tokens"] for r in recs if r["op"] == "schedule" and r["tokens"] > 0]
    outs = [r["t"] for r in recs if r["op"] == "output" and r["new_tokens"] > 0]
    itl = [b - a for a, b in zip(outs, outs[1:])]
    return tokens, itl


def run(python, args, env, d, timeout, prefix=()):
    p = subprocess.run([*prefix, python, os.path.join(HERE, "vllm_workload.py"), *args], env=env, cwd=d,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    with open(os.path.join(d, "output.txt"), "w") as f:
        f.write(p.stdout)
    result = [l for l in p.stdout.splitlines() if l.startswith(RESULT)]
    return p.returncode, result


def parser():
    """The options every vLLM test script takes (this one's and vllm_whatif.py's): the venv and
    the tools, the workload's size, how long it may take."""
    ap = argparse.ArgumentParser()
    for k in ("venv", "simgpu", "shim", "tokprof", "workdir"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--reqs", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--timeout", type=int, default=900)
    return ap


def main():
    ap = parser()
    ap.add_argument("--graphs", action="store_true")
    ap.add_argument("--moe", action="store_true", help="the MoE config: vLLM's fused MoE Triton kernel")
    ap.add_argument("--serve", action="store_true",
                    help="`vllm serve` and --reqs streaming HTTP clients, under `tokprof run -o DIR --`")
    ap.add_argument("--async-sched", default="off", choices=["on", "off"])
    ap.add_argument("--nvtx", action="store_true",
                    help="steps from vLLM's NVTX scope 'gpu_model_runner: forward' instead of auto")
    ap.add_argument("--prompt-lens", help="offline: prompt lengths (vllm_workload.py), e.g. 9,10,11,12,13")
    ap.add_argument("--capture-sizes", help="offline --graphs: CUDA-graph capture sizes, e.g. 1,2,4,8,64")
    ap.add_argument("--v2", action="store_true",
                    help="vLLM's default Model Runner V2 (its sampled-token counts written by SIMGPU_WRITES)")
    a = ap.parse_args()
    python = run_realstack.prepare(a, "vllm")
    if not python:
        return 77
    wargs = ["serve" if a.serve else "offline", "--reqs", str(a.reqs), "--tokens", str(a.tokens)]
    wargs += [] if a.serve else ["--async-sched", a.async_sched]
    wargs += ["--graphs"] if a.graphs else []
    wargs += ["--moe"] if a.moe else []
    wargs += ["--prompt-lens", a.prompt_lens] if a.prompt_lens else []
    wargs += ["--capture-sizes", a.capture_sizes] if a.capture_sizes else []
    runs = {}
    for name in ("plain", "shim"):
        d, env = run_realstack.run_env(a, name)
        env.update(SIMGPU_MEM="2G",                       # gpu_memory_utilization 0.5: 1 GiB of KV cache
                   VLLM_PROBE_LOG=os.path.join(d, "probe.jsonl"),
                   PYTHONPATH=HERE,                       # vllm_probe, in the engine-core process too
                   VLLM_USE_FLASHINFER_SAMPLER="0",       # else FlashInfer JIT-compiles its sampler (minutes)
                   VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
                   VLLM_CACHE_ROOT=os.path.join(d, "vllm-cache"))
        if a.v2:  # README.md, "vLLM": V2 reads its sampled-token counts from the device
            env["SIMGPU_WRITES"] = V2_WRITES
        else:
            env["VLLM_USE_V2_MODEL_RUNNER"] = "0"
        if a.nvtx:  # vLLM's record_function_or_nullcontext scopes become NVTX ranges (the nvtx package)
            env["VLLM_NVTX_SCOPES_FOR_PROFILING"] = "1"
            if name == "shim":
                env["TOKPROF_STEP"] = NVTX_STEP
                env["NVTX_INJECTION64_PATH"] = a.shim  # NVTX3 reaches a tool only this way
        prefix = ()
        if a.serve and name == "shim":  # as a user would: tokprof run preloads the shim
            env.pop("LD_PRELOAD")
            env.pop("TOKPROF_OUT")
            prefix = (a.tokprof, "run", "-o", d, "--shim", a.shim, "--")
        runs[name] = run(python, wargs, env, d, a.timeout, prefix)
        print(f"{name}: exit {runs[name][0]}, {runs[name][1]}")
    errors = []
    if runs["plain"] != runs["shim"] or runs["plain"][0] != 0 or not runs["plain"][1]:
        errors.append(f"runs differ or failed: without the shim {runs['plain']!r}, with it {runs['shim']!r} "
                      f"(see {a.workdir}/*/output.txt)")
    d = os.path.join(a.workdir, "shim")
    want_tokens, vllm_itl = probe_steps(os.path.join(d, "probe.jsonl")) if os.path.exists(
        os.path.join(d, "probe.jsonl")) else ([], [])
    for t, cap in run_realstack.process_captures(d, 1, errors):  # the engine core alone
        run_realstack.check_process(t, cap, a.tokprof, d, len(want_tokens), errors)
        st = subprocess.run([a.tokprof, "steps", "--json", cap], stdout=subprocess.PIPE, text=True,
                            timeout=300)
        got = [s["tokens"] for s in json.loads(st.stdout)["steps"] if s["kind"] == "token"]
        # Every step's tokens are vLLM's scheduled ones or unknown (null), never another number:
        # a step whose forward is replayed as piecewise graphs (several graph launches: the GEMMs
        # are inside them, the eager lm_head counts the sampled rows) has unknown tokens (the
        # project README, "Tokens per step"), and the summary counts them
        unknown = [i for i, x in enumerate(got) if x is None]
        if unknown:
            print(f"steps with unknown tokens: {unknown[:10]} (vLLM scheduled "
                  f"{[want_tokens[i] for i in unknown[:10] if i < len(want_tokens)]})")
        if len(got) != len(want_tokens) or any(x is not None and x != y for x, y in zip(got, want_tokens)):
            i = next((i for i, (x, y) in enumerate(zip(got, want_tokens)) if x is not None and x != y),
                     min(len(got), len(want_tokens)))
            errors.append(f"tokens per step differ first at step {i}: tokprof {got[i:i + 5]}, vLLM {want_tokens[i:i + 5]}")
        if a.moe:  # the experts are fused_moe_kernel launches: no expert count may be made up
            m = json.loads(subprocess.run([a.tokprof, "moe", "--json", cap], stdout=subprocess.PIPE, text=True,
                                          timeout=300).stdout or "{}")
            fu = m.get("fused") or {}
            if m.get("threads") or fu.get("per_expert_observable") is not False or \
                    not any("fused_moe_kernel" in k for k in fu.get("kernels", [])):
                errors.append(f"tokprof moe: {len(m.get('threads') or [])} threads of experts, fused {fu.get('kernels')}")
        sm = json.loads(subprocess.run([a.tokprof, "summary", "--json", cap], stdout=subprocess.PIPE,
                                       text=True, timeout=300).stdout)
        itl = {k: v or 0 for k, v in sm["itl_ns"].items()}  # null without token steps
        if sm.get("tokens_unknown_steps", 0) != len(unknown):
            errors.append(f"summary: {sm.get('tokens_unknown_steps', 0)} steps of unknown tokens, "
                          f"`tokprof steps` has {len(unknown)}")
        v50, v99 = pct(vllm_itl, 0.5) * 1e9, pct(vllm_itl, 0.99) * 1e9
        print(f"vLLM: {len(want_tokens)} steps, {sum(want_tokens)} tokens, ITL p50 {v50 / 1e6:.3f} ms "
              f"p99 {v99 / 1e6:.3f} ms")
        print(f"tokprof: {sm['steps']} token steps, {sm['tokens']} tokens, ITL p50 {itl['p50'] / 1e6:.3f} ms "
              f"p99 {itl['p99'] / 1e6:.3f} ms")
        if not v50 or abs(itl["p50"] - v50) > 0.1 * v50:
            errors.append(f"ITL p50: tokprof {itl['p50'] / 1e6:.3f} ms, vLLM {v50 / 1e6:.3f} ms (more than 10 % apart)")
    if errors:
        print("FAIL:\n" + "\n".join(errors[:30]))
        return 1
    print("ok: vllm " + " ".join(wargs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
