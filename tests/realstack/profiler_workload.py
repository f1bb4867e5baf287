#!/usr/bin/env python3
"""The eager tiny-Llama loop of workload.py under torch.profiler (Kineto), for the comparison of
an imported Chrome trace with the shim's capture of the same run (run_profiler.py).

    profiler_workload.py TRACE.json [--steps N]

profile(activities=[CPU, CUDA]) with a schedule of 1 + N active steps (torch writes ProfilerStep#i
ranges only with a schedule): ProfilerStep#0 is the prefill, prof.step() after each token closes
its range, so the trace has 1 + N ProfilerStep ranges, one per token; the last step exports the
Chrome trace to TRACE.json (on_trace_ready). stdout is one line, the same with and without the shim."""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workload import llama  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--steps", type=int, default=32)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.inference_mode():
        model = llama()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=0, warmup=0, active=a.steps + 1, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(a.trace)) as prof:
            ids = torch.arange(8, device="cuda").unsqueeze(0)
            out = model(input_ids=ids, use_cache=True)
            cache = out.past_key_values
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            tok.tolist()
            prof.step()  # closes ProfilerStep#0 (the prefill)
            for _ in range(a.steps):
                out = model(input_ids=tok, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                tok = out.logits[:, -1].argmax(-1, keepdim=True)
                tok.tolist()
                prof.step()  # closes this token's ProfilerStep#i; the last one exports
    print(f"profiler: {a.steps} decode steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
