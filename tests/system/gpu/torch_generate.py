#!/usr/bin/env python3
"""A small randomly initialised Llama-architecture model from transformers, generate() for N
tokens, eager or with CUDA graphs (static cache + torch.compile "reduce-overhead" when it works),
optionally under torch.profiler, writing per-kernel counts and GPU time as JSON.

usage: torch_generate.py --mode eager|graphs --tokens N [--profile OUT.json]"""
import argparse, json, sys, time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["eager", "graphs"], default="eager")
ap.add_argument("--tokens", type=int, default=64)
ap.add_argument("--profile")
a = ap.parse_args()

torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=4, vocab_size=4096, max_position_embeddings=512)
model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
ids = torch.randint(0, cfg.vocab_size, (1, 16), device="cuda")
kw = dict(max_new_tokens=a.tokens, min_new_tokens=a.tokens, do_sample=False)
note = ""
if a.mode == "graphs":
    try:
        model.generation_config.cache_implementation = "static"
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        model.generate(ids, **kw)  # compile and capture
    except Exception as e:  # report, fall back to eager
        note = f" (graphs unavailable: {type(e).__name__})"
        model = LlamaForCausalLM(cfg).to("cuda", torch.bfloat16).eval()
with torch.no_grad():
    model.generate(ids, **kw)  # warm-up
    torch.cuda.synchronize()
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = model.generate(ids, **kw)
            torch.cuda.synchronize()
        kern = {}
        for e in prof.events():
            if e.device_type.name == "CUDA":
                k = kern.setdefault(e.name, [0, 0])
                k[0] += 1
                k[1] += int(e.device_time_total * 1000) if hasattr(e, "device_time_total") else int(e.cuda_time_total * 1000)
        json.dump({"tokens": int(out.shape[1] - ids.shape[1]), "kernels": kern, "mode": a.mode + note},
                  open(a.profile, "w"))
    t0 = time.time()
    out = model.generate(ids, **kw)
    torch.cuda.synchronize()
    dt = time.time() - t0
print(f"{a.mode}{note}: {out.shape[1] - ids.shape[1]} tokens in {dt:.3f} s = {a.tokens / dt:.1f} tokens/s")
