#!/usr/bin/env python3
"""Runs unmodified llama.cpp (ggml-cuda, built by scripts/llamacpp.sh into a cache outside the
checkout) on simgpu, without and under the shim, and checks the capture against the simulator's
truth and llama.cpp's own counters.

usage: run_llamacpp.py --cache DIR --simgpu DIR --shim SO --tokprof EXE --workdir DIR
                       bench|bench-nographs|server|needed

Exit 77 (ctest's skip) with one line when the cache is not complete (its .tokprof-complete).
  bench           llama-bench -p 16 -n 32 -r 3 -o json (CUDA graphs on: after two warm-up
                  evaluations each token is one cudaGraphLaunch of a relaxed-mode capture)
  bench-nographs  the same with GGML_CUDA_DISABLE_GRAPHS=1 (every kernel an eager launch)
  bench-novmm     the same on a device without VMM (SIMGPU_VMM=0): ggml-cuda's legacy cudaMalloc
                  pool, the path of a GGML_CUDA_NO_VMM build; its log must say "VMM: no"
  server          llama-server --metrics -np 8: 8 concurrent streaming completions over HTTP
                  (n_predict 32, ignore_eos, greedy), /metrics, then SIGTERM
  needed          readelf -d: libggml-cuda.so needs libcudart.so.13, libcublas.so.13 and
                  libcuda.so.1 and defines no CUDA runtime function of its own (a static runtime
                  would be invisible to any preload)
Checks for the workloads (run_realstack.check_process for 2-6):
  1. exit status and output are the same without and with the shim (llama-bench's JSON less its
     timings; the server's completions' token counts: their text is the uncomputed logits', which
     depend on how the requests happened to be batched);
  2. every kernel the simulator executed appears exactly once in the capture, by name, on its
     thread, in order (launches; graph replays expanded into the version of the graph their exec
     had: llama.cpp updates its exec with cudaGraphExecUpdate when it re-captures);
  3. GPU records join every kernel and copy exactly (tests/e2e/gpu_compare.py);
  4. token steps (TOKPROF_STEP=auto) = llama.cpp's decode evaluations, its llama_process() decode
     calls (counted by llamacpp_decodes.c, preloaded in both runs), cross-checked by its own
     counters: llama-bench's warm-up prompt + 3 prompts + warm-up token + 3 x 32 tokens = 101; the
     server's llamacpp:n_decode_total (its warm-up is off: --no-warmup) + the one decode
     common_context_can_seq_rm() makes at load; and each token step's tokens, where tokprof
     knows them, equal to the evaluation's batch size (check_tokens);
  5. no kernel class is "other" but for names that say nothing of their family (soft_max_f32:
     attention's in a dense model, the router's in ggml's unfused MoE);
  6. `tokprof summary` reads it without a warning;
  7. tokprof's inter-token latency within 10 % of llama.cpp's own: llama-bench's tg samples_ns / 32
     per repetition (a mean: against tokprof's mean over the repetition's tokens, check_bench_itl),
     the server's per-response timings.predicted_per_token_ms (median over the 8 responses)."""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from preload import shim_preload  # noqa: E402  (tests/preload.py)
import run_realstack  # noqa: E402  (check_process: kernels, GPU join, steps, classes, summary)

MODEL = "tiny-llama-q8_0.gguf"
TIMING_KEYS = {"samples_ns", "samples_ts", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "test_time"}
BENCH_STEPS = (1 + 3) + (1 + 3 * 32)  # pp16: warm-up + 3 reps; tg32: warm-up token + 3 x 32


def build_counter(a):
    """llamacpp_decodes.c (llama.cpp's own count of its llama_process() calls), built against the
    cache's llama.h into the work folder."""
    so = os.path.join(a.workdir, "llamacpp_decodes.so")
    src = os.path.join(a.cache, "src")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", so, os.path.join(HERE, "llamacpp_decodes.c"),
                    "-I", os.path.join(src, "include"), "-I", os.path.join(src, "ggml", "include"), "-ldl"],
                   check=True)
    return so


def env_for(a, d, shim, extra):
    env = dict(os.environ, LD_LIBRARY_PATH=a.simgpu + ":" + os.path.join(a.cache, "build", "bin"),
               SIMGPU_LOG=os.path.join(d, "truth.%p.jsonl"), SIMGPU_UNIMPL_LOG=os.path.join(d, "unimpl.log"),
               LLAMACPP_DECODES=os.path.join(d, "decodes.txt"), **extra)
    env.pop("LD_PRELOAD", None)
    env["LD_PRELOAD"] = a.counter
    if shim:
        env.update(LD_PRELOAD=shim_preload(a.shim) + ":" + a.counter, TOKPROF_OUT=d)
    return env


def decode_tokens(d):
    """llama.cpp's decode evaluations in the run of folder d (llamacpp_decodes.c): the batch size
    (tokens) of each llama_process() call of type decode that returned 0, in order; None when the
    counter wrote nothing."""
    try:
        with open(os.path.join(d, "decodes.txt")) as f:
            return [int(l.split()[2]) for l in f if l.split()[:2] == ["1", "0"]]
    except OSError:
        return None


def check_tokens(a, cap, truth_tokens, errors):
    """Tokens per token step (README "Tokens per step": ggml's mul_mat_vec_q<type, N> names carry
    N, mul_mat_q says more than 8) against each evaluation's batch size, in order: every known
    figure equal, never a wrong number; the unknown ones counted."""
    out = subprocess.run([a.tokprof, "steps", "--json", cap], capture_output=True, text=True,
                         timeout=300).stdout
    rows = [s for s in json.loads(out or '{"steps":[]}')["steps"] if s["kind"] == "token"]
    if len(rows) != len(truth_tokens):
        return  # the step count's own check says it
    wrong = [(i, r["tokens"], t) for i, (r, t) in enumerate(zip(rows, truth_tokens))
             if r.get("tokens_source") and r["tokens"] != t]
    unknown = sum(1 for r in rows if not r.get("tokens_source"))
    print(f"tokens per step: {len(rows) - unknown} of {len(rows)} known "
          f"({sum(t for r, t in zip(rows, truth_tokens) if r.get('tokens_source'))} tokens), "
          f"{len(wrong)} wrong; {unknown} unknown (llama.cpp: {sum(truth_tokens)} tokens)")
    if wrong:
        errors.append("tokens per step (step, tokprof, llama.cpp): " + str(wrong[:8]))


def run_bench(a, d, env):
    cmd = [os.path.join(a.cache, "build", "bin", "llama-bench"), "-m", os.path.join(a.cache, MODEL),
           "-p", "16", "-n", "32", "-r", "3", "-o", "json", "-ngl", "99"]
    p = subprocess.run(cmd, env=env, cwd=d, capture_output=True, text=True, timeout=a.timeout)
    with open(os.path.join(d, "stderr.txt"), "w") as f:
        f.write(p.stderr)
    try:
        tests = json.loads(p.stdout)
    except ValueError:
        return (p.returncode, p.stdout), None
    same = [{k: v for k, v in t.items() if k not in TIMING_KEYS} for t in tests]
    tg = [t for t in tests if t.get("n_gen") == 32]
    reps = [s / 32 for s in tg[0]["samples_ns"]] if tg else []
    itl = sorted(reps)
    return (p.returncode, same), {"itl_p50_ns": itl[len(itl) // 2] if itl else None, "steps": BENCH_STEPS,
                                  "rep_itl_ns": reps}


def check_bench_itl(a, cap, reps, errors):
    """llama-bench times each tg repetition as a whole (samples_ns: 32 decodes and their syncs);
    its figure per token is that time / 32, a mean. tokprof's over the same tokens: the mean
    inter-token latency of the repetition's tokens 2..32 (the first one's interval holds what
    llama-bench does between repetitions, outside its timer), each repetition within 10 %.
    The token steps: 4 prompt evaluations, the tg warm-up token, then 3 x 32."""
    out = subprocess.run([a.tokprof, "steps", "--csv", cap], capture_output=True, text=True,
                         timeout=300).stdout.splitlines()
    head = out[0].split(",") if out else []
    rows = [dict(zip(head, l.split(","))) for l in out[1:]]
    itl = [int(r["itl_ns"] or 0) for r in rows if r.get("kind") == "token"]
    if len(itl) != BENCH_STEPS or len(reps) != 3:
        errors.append(f"ITL per repetition: {len(itl)} token steps, {len(reps)} repetitions")
        return
    for r, theirs in enumerate(reps):
        first = 5 + 32 * r
        mine = sum(itl[first + 1:first + 32]) / 31
        print(f"tg repetition {r + 1}: tokprof mean ITL {mine:.0f} ns (tokens 2..32), llama-bench "
              f"samples_ns / 32 {theirs:.0f} ns: {(mine - theirs) / theirs * 100:+.2f} %")
        if abs(mine - theirs) > 0.1 * theirs:
            errors.append(f"tg repetition {r + 1}: tokprof {mine:.0f} ns, llama-bench {theirs:.0f} ns "
                          "(> 10 % apart)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url, body=None, timeout=60):
    req = urllib.request.Request(url, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def completion(base, i, out):
    """One streaming completion; its final event's content so far and timings."""
    body = {"prompt": f"hello number {i}", "n_predict": 32, "ignore_eos": True, "stream": True,
            "temperature": 0, "seed": 29, "cache_prompt": False}
    text, timings = [], None
    with http(base + "/completion", body, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            ev = json.loads(line[6:])
            text.append(ev.get("content", ""))
            if ev.get("stop"):
                timings = ev.get("timings")
    out[i] = ("".join(text), timings)


def run_server(a, d, env):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [os.path.join(a.cache, "build", "bin", "llama-server"), "-m", os.path.join(a.cache, MODEL),
           "--host", "127.0.0.1", "--port", str(port), "--metrics", "-np", "8", "-c", "2048",
           "-ngl", "99", "--no-warmup"]
    err = open(os.path.join(d, "stderr.txt"), "w")
    p = subprocess.Popen(cmd, env=env, cwd=d, stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        deadline = time.time() + a.timeout
        while time.time() < deadline:
            try:
                with http(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
            if p.poll() is not None:
                return (p.returncode, "server exited before it was ready"), None
        out = {}
        threads = [threading.Thread(target=completion, args=(base, i, out)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(a.timeout)
        with http(base + "/metrics") as r:
            metrics = dict(l.split()[:2] for l in r.read().decode().splitlines()
                           if l.startswith("llamacpp:"))
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        err.close()
    done = [out.get(i) for i in range(8)]
    # the completions' token counts: their text is not (simgpu computes nothing, so the logits are
    # whatever the device memory held, which depends on how the 8 requests happened to be batched)
    same = [tm and tm.get("predicted_n") if t is not None else None for t, tm in
            (x or (None, None) for x in done)]
    per_tok = sorted(tm["predicted_per_token_ms"] * 1e6 for _, tm in (x or (None, None) for x in done) if tm)
    truth = {"itl_p50_ns": per_tok[len(per_tok) // 2] if per_tok else None,
             "steps": int(float(metrics.get("llamacpp:n_decode_total", "-1"))),
             "tokens": int(float(metrics.get("llamacpp:tokens_predicted_total", "-1")))}
    return (p.returncode, same), truth


def check_needed(a):
    lib = os.path.join(a.cache, "build", "bin", "libggml-cuda.so")
    dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
    errors = [f"{lib} does not need {n}" for n in ("libcudart.so.13", "libcublas.so.13", "libcuda.so.1")
              if f"[{n}]" not in dyn]
    defined = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                             check=True).stdout.split()
    static = [s for s in defined if s.startswith(("cudaMalloc", "cudaLaunchKernel", "cublasCreate"))]
    if static:
        errors.append(f"{lib} defines {static[:3]}: a static CUDA runtime, invisible to a preload")
    return errors


def main():
    ap = argparse.ArgumentParser()
    for k in ("cache", "simgpu", "shim", "tokprof", "workdir"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("mode", choices=["bench", "bench-nographs", "bench-novmm", "server", "needed"])
    a = ap.parse_args()
    for k in ("cache", "simgpu", "shim", "tokprof", "workdir"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    if not os.path.exists(os.path.join(a.cache, ".tokprof-complete")):
        print(f"SKIP: no llama.cpp build in {a.cache} (scripts/llamacpp.sh makes it)")
        return 77
    if a.mode == "needed":
        errors = check_needed(a)
        print("FAIL:\n" + "\n".join(errors) if errors else "ok: needed")
        return 1 if errors else 0
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    a.counter = build_counter(a)
    extra = {"bench-nographs": {"GGML_CUDA_DISABLE_GRAPHS": "1"},
             "bench-novmm": {"SIMGPU_VMM": "0"}}.get(a.mode, {})
    runs, truth = {}, {}
    for name in ("plain", "shim"):
        d = os.path.join(a.workdir, name)
        os.makedirs(d)
        env = env_for(a, d, name == "shim", extra)
        runs[name], truth[name] = (run_server if a.mode == "server" else run_bench)(a, d, env)
        if truth[name]:
            toks = decode_tokens(d)
            truth[name]["decodes"] = len(toks) if toks is not None else -1
            truth[name]["decode_tokens"] = toks
        print(f"{name}: exit {runs[name][0]}, llama.cpp's own figures {truth[name]}")
    errors = []
    if a.mode == "bench-novmm":  # ggml prints each device's VMM support at start
        for name in ("plain", "shim"):
            with open(os.path.join(a.workdir, name, "stderr.txt")) as f:
                if "VMM: no" not in f.read():
                    errors.append(f"{name}: llama.cpp's log does not say 'VMM: no'")
    if runs["plain"] != runs["shim"]:
        errors.append(f"exit/output differ: without the shim {runs['plain']!r}, with it {runs['shim']!r}")
    if not truth["shim"] or truth["shim"]["steps"] < 0 or truth["shim"]["decodes"] < 0:
        errors.append(f"the workload failed: see {a.workdir}/shim/stderr.txt")
    else:
        # llama.cpp's evaluations are its llama_process() decode calls (llamacpp_decodes.c); its
        # own counters cross-check them: llama-bench's 101, and the server's n_decode_total, which
        # leaves out the one decode common_context_can_seq_rm() makes at load to test the context
        t = truth["shim"]
        counted = t["steps"] + (1 if a.mode == "server" else 0)
        if t["decodes"] != counted:
            errors.append(f"llama_process() decodes {t['decodes']}, llama.cpp's own count {t['steps']}"
                          + (" + the load-time probe" if a.mode == "server" else ""))
        d = os.path.join(a.workdir, "shim")
        for t, cap in run_realstack.process_captures(d, 1, errors):
            run_realstack.check_process(t, cap, a.tokprof, d, truth["shim"]["decodes"], errors)
            check_tokens(a, cap, truth["shim"]["decode_tokens"], errors)
            sm = json.loads(subprocess.run([a.tokprof, "summary", "--json", cap], capture_output=True,
                                           text=True, timeout=300).stdout or "{}")
            mine, theirs = (sm.get("itl_ns") or {}).get("p50"), truth["shim"]["itl_p50_ns"]
            print(f"ITL p50: tokprof {mine} ns, llama.cpp {theirs} ns")
            if a.mode == "server":
                if not mine or not theirs or abs(mine - theirs) > 0.1 * theirs:
                    errors.append(f"inter-token p50: tokprof {mine} ns, llama.cpp {theirs} ns (> 10 % apart)")
            else:
                check_bench_itl(a, cap, truth["shim"]["rep_itl_ns"], errors)
    return run_realstack.verdict(errors, a.mode)


if __name__ == "__main__":
    sys.exit(main())
