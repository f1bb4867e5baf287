#!/usr/bin/env python3
"""Writes the tiny dense Llama GGUF the llama.cpp workloads load (no download): 2 layers, width
256, 4 query heads of 64 over 2 KV heads (GQA), FFN 512, vocabulary 512 (a SentencePiece-style
vocabulary: <unk> <s> </s>, the 256 byte tokens llama.cpp's tokenizer falls back to, and 253 word
pieces), context 512, weights Q8_0 (norms F32), seeded: the same file every time.

Q8_0 takes llama.cpp's quantized paths: mul_mat_vec_q for decode, mul_mat_q (mmq) for prefill,
k_get_rows of Q8_0 rows for the embedding. Device code never runs on simgpu, so the values only
need to be well-formed.

usage: PYTHON llamacpp_model.py OUT.gguf     (PYTHON: a venv with the `gguf` package; scripts/llamacpp.sh
                                              makes one from the llama.cpp tree's own gguf-py)
"""
import sys

import numpy as np
import gguf

N_LAYER, N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_VOCAB, N_CTX = 2, 256, 4, 2, 512, 512, 512
HEAD_DIM = N_EMBD // N_HEAD


def vocab():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
        [gguf.TokenType.BYTE] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"
    pieces = ["\u2581" + a for a in letters] + list(letters) + \
        ["\u2581" + a + b for a in letters for b in "aeiou"] + [a + b for a in letters for b in "aeiou"]
    pieces = list(dict.fromkeys(pieces))[: N_VOCAB - len(tokens)]
    tokens += pieces
    types += [gguf.TokenType.NORMAL] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    assert len(tokens) == N_VOCAB, len(tokens)
    return tokens, scores, types


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(29)
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("tokprof-tiny-llama")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(N_VOCAB)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    tokens, scores, types = vocab()
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)

    def q8(name, rows, cols):  # a [rows x cols] matrix (ggml: ne0 = cols), Q8_0
        data = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
        w.add_tensor(name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0),
                     raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    def f32(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    q8("token_embd.weight", N_VOCAB, N_EMBD)
    for i in range(N_LAYER):
        f32(f"blk.{i}.attn_norm.weight", N_EMBD)
        q8(f"blk.{i}.attn_q.weight", N_EMBD, N_EMBD)
        q8(f"blk.{i}.attn_k.weight", N_HEAD_KV * HEAD_DIM, N_EMBD)
        q8(f"blk.{i}.attn_v.weight", N_HEAD_KV * HEAD_DIM, N_EMBD)
        q8(f"blk.{i}.attn_output.weight", N_EMBD, N_EMBD)
        f32(f"blk.{i}.ffn_norm.weight", N_EMBD)
        q8(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
        q8(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        q8(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
    f32("output_norm.weight", N_EMBD)
    q8("output.weight", N_VOCAB, N_EMBD)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
