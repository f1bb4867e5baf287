#!/usr/bin/env python3
"""vLLM workloads on simgpu (tests/realstack/README.md, "vLLM"): a tiny Llama-style config written
to a temporary folder, random weights (load_format="dummy"), no tokenizer (token-id prompts),
ignore_eos (device code never runs: the sampled ids are whatever the memory held). The config goes
to ./tiny-llama (the test's work directory).

    vllm_workload.py offline [--reqs 8] [--tokens 64] [--graphs] [--async-sched on|off]

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


def model_dir(root):
    d = os.path.join(root, "tiny-llama")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(LLAMA, f)
    return d


def offline(a):
    from vllm import LLM, SamplingParams
    root = os.getcwd()  # the test's work directory
    async_sched = a.async_sched == "on"
    llm = LLM(model=model_dir(root), load_format="dummy", skip_tokenizer_init=True, dtype="bfloat16",
              enforce_eager=not a.graphs, max_model_len=256, max_num_seqs=a.reqs,
              max_num_batched_tokens=256, gpu_memory_utilization=a.gpu_mem, seed=0,
              async_scheduling=async_sched,
              # no FlashInfer autotune, no JIT warm-up of Triton kernels for every size (36 s here):
              # start-up work, not steps; CI time (README.md, "vLLM")
              kernel_config={"enable_flashinfer_autotune": False, "enable_jit_warmup": False},
              scheduler_cls="vllm_probe." + ("AsyncStepLogScheduler" if async_sched else "StepLogScheduler"),
              **({"compilation_config": {"cudagraph_capture_sizes": [1, 2, 4, 8]}} if a.graphs else {}))
    prompts = [{"prompt_token_ids": [(7 * i + j) % 500 + 3 for j in range(8)]} for i in range(a.reqs)]
    sp = SamplingParams(max_tokens=a.tokens, ignore_eos=True, temperature=0.0, detokenize=False)
    t0 = time.monotonic()
    outs = llm.generate(prompts, sp, use_tqdm=False)
    wall = time.monotonic() - t0
    if a.time:  # docs/BENCH.md: output tokens/s of generate() alone (start-up excluded)
        with open(a.time, "a") as f:
            f.write(json.dumps({"tokens_per_s": sum(len(o.outputs[0].token_ids) for o in outs) / wall}) + "\n")
    print(f"requests {len(outs)} tokens {sorted({len(o.outputs[0].token_ids) for o in outs})}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["offline"])
    ap.add_argument("--reqs", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--graphs", action="store_true", help="CUDA graphs (enforce_eager=False)")
    ap.add_argument("--async-sched", default="off", choices=["on", "off"])
    ap.add_argument("--gpu-mem", type=float, default=0.5, help="gpu_memory_utilization of SIMGPU_MEM")
    ap.add_argument("--time", help="append {tokens_per_s} of generate() to this file")
    a = ap.parse_args()
    offline(a)


if __name__ == "__main__":
    main()
