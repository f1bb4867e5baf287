/* tokprof decoder: the library-call model — GEMM calls (LIB_CALL records) with their FLOPs, the
 * kernels each launched, and per step: tokens, sequences and the step's kind (prefill / decode /
 * mixed). Shared by `tokprof gemm` and `tokprof moe`; `tokprof dump` uses the enum words.
 *
 * The token rule (docs/FORMAT.md has the record; this is the interpretation):
 *   - Token dimension. Frameworks with row-major activations (PyTorch Linear, vLLM, HF, and
 *     minillm) call cuBLAS as C(out x T) = W^T(out x in) * X(in x T): m = out features,
 *     n = tokens, k = in features. A capture-wide vote decides between n and m: GEMMs that share
 *     (m, k, types) but differ in n, versus those that share (n, k, types) but differ in m; the
 *     dimension that varies is the token one, n on a tie (nothing varies: a decode-only capture).
 *   - Tokens of a step T = the largest token dimension among its unbatched GEMMs (the q/k/v/o,
 *     MLP and router projections all see every token; per-expert GEMMs and lm_head see fewer).
 *   - Sequences of a step S = the token dimension of its last GEMM: every serving loop ends the
 *     forward with lm_head over the last position of each sequence.
 *   - Kind: decode when T == S (one new token per sequence); when T > S, prefill if the thread had
 *     no decode step before, else mixed (new prompt tokens next to decoding sequences). A step
 *     whose forward is a CUDA graph replay shows only the eager GEMMs (lm_head): T == S, decode.
 *     No GEMM at all: unknown (a graph-only step is reported as decode when the previous step of
 *     the thread was).
 * Batched GEMMs (batch > 1: attention bmm) and calls recorded while their stream was capturing a
 * graph (not executed then) are excluded from T and S. */
#ifndef TKP_LIBCALLS_H
#define TKP_LIBCALLS_H

#include <stdint.h>

struct tkp_reader;

struct tkp_call {
    uint32_t thread, call, lib, status, flags;
    uint64_t step; /* segment on its thread */
    uint64_t host_ns, call_ns;
    const char *op;
    uint64_t m, n, k, batch;
    int32_t atype, btype, ctype, compute, transa, transb;
    uint64_t stream, a_ptr;
    uint32_t kernels; /* LAUNCH records that carried this call's id */
    uint64_t gpu_ns;  /* GPU time of those kernels (GPU_KERNEL joined to their LAUNCH); 0 when
                       * the capture has none */
    uint64_t tokens;  /* the token dimension (m or n, per the rule above) */
};

enum tkp_step_class { TKP_KIND_UNKNOWN = 0, TKP_KIND_PREFILL, TKP_KIND_DECODE, TKP_KIND_MIXED };

struct tkp_lstep {
    uint32_t thread;
    uint64_t step;
    uint32_t first, ncalls; /* its calls: calls[first .. first+ncalls) */
    uint64_t tokens, seqs;  /* T and S above, 0 unknown */
    uint64_t flops;         /* 2*m*n*k*batch over its executed GEMM calls */
    uint32_t graph_launches, launches;
    int kind; /* enum tkp_step_class */
};

struct tkp_libmodel {
    struct tkp_call *calls; /* ordered by (thread, host_ns) */
    uint32_t ncalls;
    struct tkp_lstep *steps; /* the steps that have calls or launches, ordered (thread, step) */
    uint32_t nsteps;
    int token_dim_m; /* 1: tokens are m (the vote above), 0: n */
    uint64_t unmatched_launches; /* launches naming a call that has no LIB_CALL record */
};

/* Reads the whole capture into *m. Returns 0 or a negative tkp_err (the reader's error is left in
 * r for tkp_cmd_warn_reader). */
int tkp_libmodel_load(struct tkp_reader *r, struct tkp_libmodel *m);
void tkp_libmodel_free(struct tkp_libmodel *m);

/* A part of the model, for captures too large to hold whole: the records of one thread's steps
 * [lo, hi) only, with the token dimension given (the capture's: tkp_libmodel_scan). Steps' kinds
 * are judged within the window. Returns as tkp_libmodel_load. */
struct tkp_lwindow {
    uint32_t thread;
    uint64_t lo, hi;
    int token_dim_m;
};
int tkp_libmodel_load_window(struct tkp_reader *r, const struct tkp_lwindow *w,
                             struct tkp_libmodel *m);
/* What windows need, in one pass: the token dimension (the load's vote, over the capture's
 * distinct (weight, m, n): O(distinct shapes) memory) and per thread (ascending) its steps and
 * library-model records (LIB_CALL, LAUNCH, GRAPH_LAUNCH, joined GPU_KERNEL). 0 or NOMEM. */
struct tkp_lthread {
    uint32_t thread;
    uint64_t segs;    /* the highest step seen + 1 */
    uint64_t records; /* records a load of all its steps keeps */
};
struct tkp_lscan {
    int token_dim_m;
    struct tkp_lthread *t;
    uint32_t nt;
};
int tkp_libmodel_scan(struct tkp_reader *r, struct tkp_lscan *sc);
void tkp_lscan_free(struct tkp_lscan *sc);

/* 1 when the call counts toward FLOPs and tokens: a GEMM that ran (status 0, not captured). */
int tkp_call_executed(const struct tkp_call *c);
/* 2*m*n*k*batch, 0 when a dimension is unknown */
double tkp_call_flops(const struct tkp_call *c);

/* The steps of the thread of steps[s0]: [s0, return value). */
uint32_t tkp_libmodel_thread_end(const struct tkp_libmodel *m, uint32_t s0);

/* Words: "bf16", "f32", "32F", "T", "cublas", "decode"; unknown values as "?" or "unknown(N)"
 * in buf (at least 24 bytes). */
const char *tkp_dtype_str(int32_t t, char *buf);
const char *tkp_compute_str(int32_t t, char *buf);
const char *tkp_trans_str(int32_t t, char *buf);
const char *tkp_lib_str(uint32_t lib, char *buf);
const char *tkp_step_class_str(int kind);

/* Tokens a kernel's name carries (the "kernels" rule of tokens per step, analysis.h): ggml-cuda's
 * quantized matrix-vector product mul_mat_vec_q<type, ncols_dst, ...> multiplies a weight by
 * ncols_dst columns of activations, one per token of the micro-batch (1 to 8: ggml's
 * MMVQ_MAX_BATCH_SIZE); a larger micro-batch runs mul_mat_q<type, mmq_x, ...>, whose name says only
 * "more than 8": -1. 0 for any other kernel. Mangled (as the shim records them) or demangled. */
int tkp_kernel_token_cols(const char *name);

#endif
