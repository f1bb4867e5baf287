#!/usr/bin/env python3
"""Real-client workloads for simgpu: tiny models built from configs in code (no downloads), run by
unmodified PyTorch / transformers / Triton. Device code never runs on simgpu, so no control flow
reads a device value: the loops run a fixed number of decode steps.

    workload.py eager|graph|compile|compile-ro|moe|server|whole|whole-ro|recipe [--steps N] [--time FILE]

Each decode step ends as a server's does: the sampled tokens are copied to the host (`.tolist()`:
a DtoH copy + a stream sync). stdout is one line per run (the mode and the step count) and must
be the same with and without the shim. --time appends the decode loop's wall time and tokens/s
to FILE as one JSON line (docs/BENCH.md), never to stdout."""
import argparse
import json
import os
import sys
import time

import torch


def llama(layers=2):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()


def moe():
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM
    cfg = Qwen2MoeConfig(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                         shared_expert_intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, num_experts=8, num_experts_per_tok=2,
                         max_position_embeddings=128)
    torch.manual_seed(0)
    return Qwen2MoeForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()


LOOP_START = [0.0]  # when the decode loop began (after prefill), for --time


def step_range(name):
    """An NVTX range around each prefill and decode step, as a server marks its steps (tokprof's
    TOKPROF_STEP=nvtx:^(prefill|decode)$ uses them; they cost nothing without a tool)."""
    return torch.cuda.nvtx.range(name)


def eager_loop(model, steps, batch=1, prompt=8):
    """Prefill + `steps` greedy decode steps with the KV cache (DynamicCache)."""
    with step_range("prefill"):
        ids = torch.arange(prompt, device="cuda").repeat(batch, 1)
        out = model(input_ids=ids, use_cache=True)
        cache = out.past_key_values
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        tok.tolist()
    LOOP_START[0] = time.perf_counter()
    for _ in range(steps):
        with step_range("decode"):
            out = model(input_ids=tok, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            tok.tolist()  # the token to the host, as a server does every step
    return steps


def static_step_fn(model, batch, max_len, mask=False):
    """A decode step on a StaticCache; with `mask`, the model is given an attention mask of ones
    (transformers then reads a data-dependent flag back in each eager forward: is it all ones?)."""
    from transformers import StaticCache
    cache = StaticCache(config=model.config, max_batch_size=batch, max_cache_len=max_len,
                        device="cuda", dtype=torch.bfloat16)
    extra = {"attention_mask": torch.ones(batch, max_len, dtype=torch.long, device="cuda")} if mask else {}

    def step(tok, pos):
        out = model(input_ids=tok, past_key_values=cache, cache_position=pos, use_cache=True, **extra)
        return out.logits[:, -1].argmax(-1, keepdim=True)
    return cache, step


def capture_graph(step, static_tok, static_pos, warmup):
    """PyTorch's recipe: `warmup` calls on a side stream (outside the graph, as torch's docs ask),
    then the step captured into a torch.cuda.CUDAGraph. Returns the graph and its output."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step(static_tok, static_pos)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = step(static_tok, static_pos)
    return g, static_out


def graph_loop(model, steps, prompt=8):
    """Static cache; the decode step captured once into a torch.cuda.CUDAGraph and replayed."""
    cache, step = static_step_fn(model, 1, prompt + steps + 8)
    with step_range("prefill"):
        ids = torch.arange(prompt, device="cuda").unsqueeze(0)
        tok = step(ids, torch.arange(prompt, device="cuda"))
        tok.tolist()
    static_tok, static_pos = tok.clone(), torch.tensor([prompt], device="cuda")
    g, static_out = capture_graph(step, static_tok, static_pos, 1)
    for i in range(steps):
        with step_range("decode"):
            static_pos.fill_(prompt + i)
            g.replay()
            static_tok.copy_(static_out)
            static_out.tolist()
    return steps


def compile_loop(model, steps, mode, prompt=8):
    """torch.compile of the decode step (static cache, so shapes do not change)."""
    cache, step = static_step_fn(model, 1, prompt + steps + 8)
    with step_range("prefill"):
        ids = torch.arange(prompt, device="cuda").unsqueeze(0)
        tok = step(ids, torch.arange(prompt, device="cuda"))
        tok.tolist()
    cstep = torch.compile(step, mode=mode, fullgraph=True)
    pos = torch.tensor([prompt], device="cuda")
    for i in range(steps):
        with step_range("decode"):  # the first one compiles
            pos.fill_(prompt + i)
            tok = cstep(tok, pos).clone()
            tok.tolist()
    return steps


def whole_loop(model, steps, mode, prompt=8):
    """A new user's loop, no NVTX, no markers: the model compiled whole (`torch.compile(model)`),
    greedy tokens appended to the sequence, no KV cache (GPT-2 style), each token read back with
    `.item()`. The sequence grows, so the first calls compile (and recompile for dynamic shapes)."""
    cmodel = torch.compile(model, mode=mode)
    ids = torch.arange(prompt, device="cuda").unsqueeze(0)
    for _ in range(steps):
        logits = cmodel(input_ids=ids).logits
        tok = logits[:, -1].argmax(-1, keepdim=True)
        tok.item()  # the token to the host
        ids = torch.cat([ids, tok], dim=1)
    return steps


def recipe_loop(model, steps, prompt=8, warmup=3):
    """PyTorch's documented CUDA-graph recipe, as a user copies it: `warmup` forwards on a side
    stream, then `torch.cuda.graph` capture and replays. The model is given an attention mask, so
    each eager forward of transformers reads a data-dependent flag back (is the padding mask all
    ones?) — the prefill's and every warm-up forward's, on the warm-up's side stream."""
    cache, step = static_step_fn(model, 1, prompt + steps + 8, mask=True)
    ids = torch.arange(prompt, device="cuda").unsqueeze(0)
    tok = step(ids, torch.arange(prompt, device="cuda"))
    tok.tolist()  # the prefill's token
    static_tok, static_pos = tok.clone(), torch.tensor([prompt], device="cuda")
    g, static_out = capture_graph(step, static_tok, static_pos, warmup)
    for i in range(steps):
        static_pos.fill_(prompt + i)
        g.replay()
        static_tok.copy_(static_out)
        static_out.tolist()
    return steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["eager", "graph", "compile", "compile-ro", "moe", "server", "whole",
                                     "whole-ro", "recipe"])
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--time", help="append the decode loop's tokens/s to this file (JSON line)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.inference_mode():
        if a.mode == "eager":
            n = eager_loop(llama(), a.steps)
        elif a.mode == "graph":
            n = graph_loop(llama(), a.steps)
        elif a.mode in ("compile", "compile-ro"):
            n = compile_loop(llama(), a.steps, "default" if a.mode == "compile" else "reduce-overhead")
        elif a.mode == "moe":
            n = eager_loop(moe(), a.steps, batch=4)
        elif a.mode in ("whole", "whole-ro"):
            n = whole_loop(llama(), a.steps, "default" if a.mode == "whole" else "reduce-overhead")
        elif a.mode == "recipe":
            n = recipe_loop(llama(), a.steps)
        else:
            return server(a)
    torch.cuda.synchronize()
    if a.time and LOOP_START[0]:
        dt = time.perf_counter() - LOOP_START[0]
        with open(a.time, "a") as f:
            f.write(json.dumps({"mode": a.mode, "decode_steps": n, "decode_s": dt, "tokens_per_s": n / dt}) + "\n")
    print(f"{a.mode}: {n} decode steps")
    return 0


def server(a):
    """Two worker processes (as a server's), each an eager Llama decode loop."""
    if a.worker >= 0:
        with torch.inference_mode():
            n = eager_loop(llama(), a.steps)
        torch.cuda.synchronize()
        return 0 if n == a.steps else 1
    import subprocess
    procs = [subprocess.Popen([sys.executable, __file__, "server", "--steps", str(a.steps), "--worker", str(w)])
             for w in range(2)]
    rcs = [p.wait() for p in procs]
    print(f"server: 2 workers, {a.steps} decode steps each, exit {rcs}")
    return max(rcs)


if __name__ == "__main__":
    sys.exit(main())
