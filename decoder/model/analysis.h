/* tokprof decoder: analyses over the step model — per-step extras read in the same streaming
 * pass (tokens per step from LIB_CALL shapes, GPU idle split into launch gaps and host waits),
 * change points in the step latency series, scaling slopes and a launch-bound verdict.
 *
 *     struct tkp_model m;  struct tkp_acc *a;  struct tkp_analysis an;
 *     err = tkp_cmd_load_analysis(ctx, path, &m, &a);   // one pass: model + acc, progress on a TTY
 *     err = tkp_analysis_make(&m, a, &an);
 *     ... read an.cps, an.attn, an.verdict ...
 *     tkp_analysis_free(&an); tkp_acc_free(a); tkp_model_free(&m);
 *
 * Per-step extras (struct tkp_acc). The model computes them in its own pass (model.h: from the
 * host times of an open step's launches and graph launches and its kernel intervals, when the
 * step closes by the model's watermark), and an acc reads them: bound to the caller's model
 * (tkp_acc_bind) or, standalone (tkp_acc_new), from a model of its own that tkp_acc_add feeds.
 * Memory: O(steps) results plus one window of open records, plus O(distinct GEMM weights) for
 * the token vote.
 *   - tokens: the rule of libcalls.h, streamed — per step the largest n and m of its executed
 *     unbatched GEMMs and those of its last one; the capture-wide vote (weights a_ptr seen with
 *     more than one m, against those seen with more than one n) picks the token dimension at the
 *     end.
 *   - idle split: the step's kernels sorted by start and merged; each gap inside the GPU span is
 *     a *launch gap* when the launch (or graph launch) of the kernel that ends the gap was made
 *     after the previous kernel ended (the GPU waited for the host to launch), otherwise a *host
 *     wait* (the work was queued but held back: a stream wait, a dependency, a stall).
 *
 * Change points (tkp_cp_find): binary segmentation on the mean of a series, after a 5-point
 * running median (it removes isolated spikes — a stall every K steps — without moving the edges
 * of a level shift). A split of a segment of n points is kept when it lowers the sum of squared
 * deviations by more than the BIC-like penalty 2·σ²·ln(N) (two new parameters: a location and a
 * mean; N the whole series) AND moves the mean by at least TKP_CP_MIN_REL of the lower side's
 * mean (a shift too small to matter, like the context staircase of attention, is not reported)
 * AND stands TKP_CP_MIN_T standard errors clear of the two segments' own spread (Welch's t on
 * the smoothed values: host noise is heavy-tailed, and a MAD-based σ alone lets it split).
 * σ is robust: 1.4826·MAD of the first differences / √2, floored at 0.1% of the series median
 * (deterministic series have σ = 0). Segments shorter than TKP_CP_MIN_SEG are never split off.
 * Once all splits are made, a change point whose final neighbouring segments (smoothed) differ by
 * less than TKP_CP_MIN_REL is dropped, the weakest first; the levels reported either side are
 * those segments' smoothed means.
 * Two series: the GPU busy time of the token steps (when the capture has GPU records) and their
 * host duration. Host duration moves with the machine's load (preemption, another process on
 * the cores) as much as with the program; GPU busy time does not. So with GPU records a host
 * change point is reported only when something in the capture explains it: a GPU busy change
 * point within TKP_CP_NEAR steps, or a change of the steps' shape between its two segments (the
 * median launches + graph launches per step moved by TKP_CP_MIN_REL, or the median tokens per
 * step changed: graphs turned on, a new batch size). Any other host shift (same GPU work, same
 * launches) is set aside in `host_only`, printed as such and not called a change point. Without
 * GPU records the host series is all there is and its change points are reported as found (a
 * sustained load on the machine is then indistinguishable from a slower program).
 *
 * Slopes (least squares over the decode steps of the thread with the most token steps):
 *   - attention: attention-class GPU time per step against KV tokens, reported per 1k tokens.
 *     KV tokens of a step = seqs × context, context = prompt tokens per sequence + decode steps
 *     since the prefill (a minillm-like loop: one sequence set, one new token per sequence per
 *     step). With library calls, the prefill's tokens/seqs is the prompt length; without them the
 *     step index alone is the context (prompt unknown: the slope is still per token).
 *   - MLP: gemm-class GPU time per step against tokens per step (needs library calls and at least
 *     two distinct token counts).
 * Idle split: with GPU records, idle share = idle / span over token steps, split into launch gaps
 * (the kernel ending the gap was launched after the GPU went idle) and host waits (the rest).
 * Verdict: figures.h's rule (the host's time: waiting on the GPU, launch calls, its own code),
 * the same word as summary's. */
#ifndef TKP_ANALYSIS_H
#define TKP_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/figures.h"
#include "model/model.h"

struct tkp_record;
struct tkp_acc;

#define TKP_CP_MIN_SEG 10    /* points on each side of a change point */
#define TKP_CP_MIN_REL 0.10  /* smallest mean shift reported, relative to the lower side */
#define TKP_CP_MIN_T 8.0     /* smallest Welch t of the shift (smoothed values) */
#define TKP_CP_MAX 16        /* change points reported per series */
#define TKP_CP_NEAR 5        /* a host change this close (steps) to a GPU busy one is the same */

/* Per-step extras. */
struct tkp_astep {
    uint64_t tokens, seqs;       /* 0 unknown (no executed GEMM, or hidden) */
    int hidden; /* 1: the forward ran as several CUDA graphs (TKP_HIDDEN_GRAPHS): tokens unknown */
    uint64_t kern_tokens;        /* tokens its kernels' names carry (mstep kern_tokens), 0 none */
    int kern_many;               /* one of its kernels' names says "more" (mul_mat_q) */
    int kind;                    /* enum tkp_step_class (libcalls.h) */
    uint64_t launch_gap_ns, wait_ns; /* idle inside the GPU span, split (see above) */
};

/* A standalone acc, with a model of its own (built-in classes). 0 or NOMEM. */
int tkp_acc_new(struct tkp_acc **out);
/* An acc that reads the extras of model m (which must outlive it): feeding m is enough, and
 * tkp_acc_add / tkp_acc_finish do nothing. 0 or NOMEM. */
int tkp_acc_bind(struct tkp_model *m, struct tkp_acc **out);
/* Feeds one record to a standalone acc (the same records the model gets). Returns 0 or NOMEM. */
int tkp_acc_add(struct tkp_acc *a, const struct tkp_record *r);
/* Closes every open step of a standalone acc and decides the token dimension. 0 or NOMEM. */
int tkp_acc_finish(struct tkp_acc *a);
void tkp_acc_free(struct tkp_acc *a); /* accepts NULL; never frees a bound acc's model */
/* The extras of step (thread, seg): 1 found, 0 not (all zero then). */
int tkp_acc_step(const struct tkp_acc *a, uint32_t thread, uint64_t seg, struct tkp_astep *out);
/* The same for m->steps[i] (m finished): without a search when a is bound to m. */
int tkp_acc_step_of(const struct tkp_acc *a, const struct tkp_model *m, size_t i,
                    struct tkp_astep *out);
/* While a step is still open: the host time of its launch (join TKP_JOIN_LAUNCH) or graph launch
 * (TKP_JOIN_GRAPH_LAUNCH) number `index`. 1 found, 0 not. */
int tkp_acc_launch_ns(const struct tkp_acc *a, uint32_t thread, uint64_t seg, uint32_t join,
                      uint32_t index, uint64_t *ns);
/* 1 when any step has tokens from library calls. */
int tkp_acc_has_tokens(const struct tkp_acc *a);
/* 1 when any kernel name carries tokens (tkp_kernel_token_cols, libcalls.h). */
int tkp_acc_has_kernel_tokens(const struct tkp_acc *a);

/* Tokens of each step, for `tokprof steps` (the rule, in order; docs in the steps help):
 *   1. shapes    the step's own executed unbatched GEMMs (libcalls.h's rule: the largest token
 *                dimension among them);
 *   2. kernels   in a capture whose kernel names carry token counts (ggml-cuda's
 *                mul_mat_vec_q<type, ncols>: tkp_kernel_token_cols), the largest of the step's;
 *                unknown when one of them says "more than 8" (mul_mat_q);
 *   3. previous  a token step without any such GEMM (a forward replayed as a CUDA graph, with
 *                no eager GEMM left) in a capture that has shapes: the sequences of the thread's
 *                previous token step whose tokens are known (one new token per sequence);
 *   4. assumed   a capture with neither GEMM shapes (no cuBLAS / cuBLASLt calls) nor such kernel
 *                names: 1 for every token step of a thread but its first — a batch-1 decode loop,
 *                each step ending at the sampled token; the first (the prefill: the prompt length
 *                is unknown) and the steps of a batch > 1 server are not knowable;
 * A part step's tokens (STEP kind part: an evaluation read back in parts) are its token step's:
 * the token step gets the sum, unknown when any part's is;
 * else unknown (0, TKP_TOK_NONE), and always for outside and open steps, and for a step whose
 * forward ran as TKP_HIDDEN_GRAPHS graph launches or more (vLLM's piecewise CUDA graphs: a
 * prefill or mixed step up to the largest captured size): its GEMMs are inside the graphs, and
 * the eager ones left (the lm_head over the sampled rows) count sequences, not tokens. */
#define TKP_HIDDEN_GRAPHS 2
enum tkp_tok_src {
    TKP_TOK_NONE = 0, TKP_TOK_SHAPES, TKP_TOK_PREVIOUS, TKP_TOK_ASSUMED, TKP_TOK_KERNELS
};
/* Fills tokens[i] and src[i] for every m->steps[i] (arrays of m->nsteps, the caller's). */
void tkp_step_tokens(const struct tkp_model *m, const struct tkp_acc *a, uint64_t *tokens,
                     int *src);
/* The same rule one step at a time, along a thread's steps in order: the state a thread carries
 * (zeroed at its start), for a caller that sees steps in passes (fleet/tail.c). found and as:
 * tkp_acc_step's answer for s; shapes, kernels: tkp_acc_has_tokens, tkp_acc_has_kernel_tokens. */
struct tkp_tokrule {
    uint64_t prev_seqs, part_tok;
    int started, part, part_unknown;
};
void tkp_tokrule_step(struct tkp_tokrule *st, const struct tkp_mstep *s, int found,
                      const struct tkp_astep *as, int shapes, int kernels, uint64_t *tok,
                      int *src);
/* "shapes", "kernels", "previous", "assumed", NULL for TKP_TOK_NONE. */
const char *tkp_tok_src_str(int src);


/* One change point of a series. */
struct tkp_cp {
    size_t at;                   /* index of the first point after the change */
    double before, after;        /* segment means, smoothed (the segments either side) */
};

/* Change points of v[0..n) (see above), in increasing order. Returns how many (<= max), or NOMEM. */
int tkp_cp_find(const double *v, size_t n, struct tkp_cp *out, int max);

/* Least-squares line y = a + b x. Returns 0, or -1 with fewer than 2 distinct x. */
int tkp_fit_line(const double *x, const double *y, size_t n, double *a, double *b, double *r2);

struct tkp_acp { /* a change point, named */
    const char *series;          /* "host" (host duration) or "busy" (GPU busy) */
    int64_t step;                /* token index of the first step after the change */
    size_t a, at, b;             /* the segments either side: series positions [a, at), [at, b) */
    double before_ns, after_ns;
    int ncls;
    int cls[3];                  /* the classes that moved most, by |delta| */
    double cls_before[3], cls_after[3]; /* their medians per step either side */
};

struct tkp_slope {
    int ok;
    size_t n;
    double per1k_ns, intercept_ns, r2; /* attention: ns per 1k KV tokens; MLP: ns per token */
};

struct tkp_analysis {
    uint32_t thread, tid;        /* the series' thread: the one with the most token steps */
    size_t nseries;              /* its token steps */
    int gpu;
    struct tkp_acp cps[2 * TKP_CP_MAX];
    int ncps;
    struct tkp_acp host_only[TKP_CP_MAX]; /* host shifts set aside (GPU records: see above) */
    int nhost_only;
    struct tkp_slope attn, mlp;
    int tokens_known;
    uint64_t prompt_tokens;      /* per sequence, 0 unknown */
    uint64_t span_ns, busy_ns, launch_gap_ns, wait_ns; /* token steps, all threads */
    double idle_share, gap_share;
    struct tkp_verdict v;        /* figures.h */
    const char *verdict;         /* v.word: "gpu-bound", "launch-bound", "host-bound", "unknown" */
};

/* Runs every analysis. Returns 0 or NOMEM. */
int tkp_analysis_make(const struct tkp_model *m, const struct tkp_acc *a, struct tkp_analysis *an);
void tkp_analysis_free(struct tkp_analysis *an);

/* One short line per change point and slope (for summary and analyze), each ending in '\n'. */
void tkp_analysis_print_lines(FILE *f, const struct tkp_model *m, const struct tkp_analysis *an);
/* The analyses as JSON members, comma-separated, without braces or a leading comma: "series_tid",
 * "change_points", "slopes", "idle" (the verdict is an->verdict: callers name it). */
void tkp_analysis_print_json(FILE *f, const struct tkp_model *m, const struct tkp_analysis *an);

#endif
