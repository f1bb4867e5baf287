#!/usr/bin/env python3
"""vLLM workloads on simgpu (tests/realstack/README.md, "vLLM"): a tiny Llama-style config written
to a temporary folder, random weights (load_format="dummy"), no tokenizer (token-id prompts),
ignore_eos (device code never runs: the sampled ids are whatever the memory held). The config goes
to ./tiny-llama (the test's work directory).

    vllm_workload.py offline [--reqs 8] [--tokens 64] [--graphs] [--async-sched on|off] [--moe]
                             [--prompt-lens 8] [--capture-sizes 1,2,4,8]
    vllm_workload.py serve --reqs 16 [--tokens 64] [--graphs]   (`vllm serve` + an HTTP client)

Prints what vLLM returned that does not depend on the (garbage) token values: requests and
tokens per request. Its scheduler is tests/realstack/vllm_probe.py's (logs every step to
$VLLM_PROBE_LOG), found on PYTHONPATH in the engine-core process."""
import argparse
import json
import os
import sys
import time

LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "vocab_size": 512, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    "bos_token_id": 1, "eos_token_id": 2,
}


# The MoE config: the same Llama with 8 experts, top-2 (Mixtral): vLLM's fused MoE Triton kernel.
MIXTRAL = dict(LLAMA, architectures=["MixtralForCausalLM"], model_type="mixtral", num_local_experts=8,
               num_experts_per_tok=2)


def model_dir(root, moe=False):
    d = os.path.join(root, "tiny-mixtral" if moe else "tiny-llama")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(MIXTRAL if moe else LLAMA, f)
    return d


def sizes(text):
    """'1,2,4,8' -> [1, 2, 4, 8]"""
    return [int(x) for x in text.split(",")]


def offline(a):
    from vllm import LLM, SamplingParams
    root = os.getcwd()  # the test's work directory
    async_sched = a.async_sched == "on"
    llm = LLM(model=model_dir(root, a.moe), load_format="dummy", skip_tokenizer_init=True, dtype="bfloat16",
              enforce_eager=not a.graphs, max_model_len=256, max_num_seqs=a.reqs,
              max_num_batched_tokens=256, gpu_memory_utilization=a.gpu_mem, seed=0,
              async_scheduling=async_sched,
              # no FlashInfer autotune, no JIT warm-up of Triton kernels for every size (36 s here):
              # start-up work, not steps; CI time (README.md, "vLLM")
              kernel_config={"enable_flashinfer_autotune": False, "enable_jit_warmup": False},
              scheduler_cls="vllm_probe." + ("AsyncStepLogScheduler" if async_sched else "StepLogScheduler"),
              **({"compilation_config": {"cudagraph_capture_sizes": sizes(a.capture_sizes)}} if a.graphs else {}))
    lens = sizes(a.prompt_lens)
    prompts = [{"prompt_token_ids": [(7 * i + j) % 500 + 3 for j in range(lens[i % len(lens)])]}
               for i in range(a.reqs)]
    sp = SamplingParams(max_tokens=a.tokens, ignore_eos=True, temperature=0.0, detokenize=False)
    t0 = time.monotonic()
    outs = llm.generate(prompts, sp, use_tqdm=False)
    wall = time.monotonic() - t0
    if a.time:  # docs/BENCH.md: output tokens/s of generate() alone (start-up excluded)
        with open(a.time, "a") as f:
            f.write(json.dumps({"tokens_per_s": sum(len(o.outputs[0].token_ids) for o in outs) / wall}) + "\n")
    print(f"requests {len(outs)} tokens {sorted({len(o.outputs[0].token_ids) for o in outs})}")
    sys.stdout.flush()


def serve(a):
    """`vllm serve` as a child (it inherits the environment: under `tokprof run` the shim), 16
    concurrent streaming completions over HTTP to 127.0.0.1, then SIGTERM and a clean exit."""
    import http.client
    import signal
    import socket
    import subprocess
    import threading
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model_dir(os.getcwd(), a.moe),
            "--host", "127.0.0.1", "--port", str(port), "--load-format", "dummy",
            "--skip-tokenizer-init", "--dtype", "bfloat16", "--max-model-len", "256",
            "--max-num-seqs", str(a.reqs), "--max-num-batched-tokens", "256",
            "--gpu-memory-utilization", str(a.gpu_mem), "--seed", "0",
            "--kernel-config", json.dumps({"enable_flashinfer_autotune": False, "enable_jit_warmup": False}),
            "--scheduler-cls", "vllm_probe.AsyncStepLogScheduler"] + ([] if a.graphs else ["--enforce-eager"])
    with open("server.log", "w") as log:
        srv = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + a.start_timeout
    while True:
        if srv.poll() is not None or time.monotonic() > deadline:
            srv.kill()
            print(f"server did not start (exit {srv.poll()}): see server.log")
            return 1
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        time.sleep(1)
    counts = [0] * a.reqs

    def one(i):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        body = {"model": model_dir(os.getcwd(), a.moe), "prompt": [(7 * i + j) % 500 + 3 for j in range(8)],
                "max_tokens": a.tokens, "ignore_eos": True, "temperature": 0.0, "stream": True,
                "return_token_ids": True}
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        for line in r:
            line = line.strip()
            if line.startswith(b"data: {"):
                ev = json.loads(line[6:])
                counts[i] += sum(len(ch.get("token_ids") or []) for ch in ev.get("choices", []))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(a.reqs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # vLLM's API server SIGKILLs its engine core at once on shutdown (--shutdown-timeout 0, the
    # default): what the shim had not flushed yet (TOKPROF_FLUSH_MS, 200 ms) is lost, as with any
    # SIGKILL. An operator's shutdown comes later than the last token; so does this one.
    time.sleep(2.0)
    srv.send_signal(signal.SIGTERM)
    rc = srv.wait(timeout=120)
    print(f"requests {a.reqs} tokens {sorted(set(counts))} server exit {rc}")
    sys.stdout.flush()
    return 0 if rc == 0 else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["offline", "serve"])
    ap.add_argument("--reqs", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--graphs", action="store_true", help="CUDA graphs (enforce_eager=False)")
    ap.add_argument("--moe", action="store_true", help="the MoE config (8 experts, top-2)")
    ap.add_argument("--prompt-lens", default="8", help="offline: prompt lengths, request i gets the (i %% n)-th")
    ap.add_argument("--capture-sizes", default="1,2,4,8", help="offline --graphs: cudagraph_capture_sizes")
    ap.add_argument("--async-sched", default="off", choices=["on", "off"])
    ap.add_argument("--gpu-mem", type=float, default=0.5, help="gpu_memory_utilization of SIMGPU_MEM")
    ap.add_argument("--time", help="append {tokens_per_s} of generate() to this file")
    ap.add_argument("--start-timeout", type=float, default=600, help="serve: seconds to wait for /health")
    a = ap.parse_args()
    sys.exit(serve(a) if a.mode == "serve" else offline(a))


if __name__ == "__main__":
    main()
