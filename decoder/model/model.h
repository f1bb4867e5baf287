/* tokprof decoder: the step model — per thread, per step (segment) host and GPU figures, and per
 * kernel name / class GPU-time distributions, built in one streaming pass over the reader.
 *
 *     struct tkp_model m;
 *     tkp_model_init(&m, &opts);            // opts.classes required
 *     while (tkp_reader_next(r, &rec) == 1)
 *         if ((err = tkp_model_add(&m, &rec))) break;
 *     err = tkp_model_finish(&m);           // closes every step, sorts, fills gaps
 *     ... read m.steps, m.names, m.cls ...
 *     tkp_model_free(&m);
 *
 * How GPU records find their step: GPU_KERNEL/GPU_COPY carry the join (thread, step, join kind,
 * index) the shim made from CUPTI's correlation ids (docs/FORMAT.md "GPU records"); the model
 * looks the step up by (thread, step). `index` is the ordinal of the causing LAUNCH (or
 * GRAPH_LAUNCH) in that step, so pairing a kernel with its launch's host_ns needs the step's
 * launch times: they are kept while the step is open.
 *
 * When a step closes (the watermark): GPU records arrive chunks after their launch (CUPTI hands
 * over buffers every TOKPROF_FLUSH_MS, 200 ms by default), possibly before the STEP record. A step
 * stays open — its kernel intervals and launch times kept — until its STEP record has been read
 * AND the capture's host clock (the newest host_ns or chunk base read so far) has passed the
 * window beyond the later of the step's end_ns and its last GPU end, and no GPU record is still
 * awaited: while GPU tracing is on, a step that has fewer GPU kernel records than it launched
 * kernels (LAUNCH records and its graph replays' kernel nodes) stays open until a GPU record of a
 * later step of its thread arrives (CUPTI delivers in completion order: the missing ones will not
 * come) or TKP_MODEL_AWAIT_MAX steps are open, so a GPU record belongs to its launch's step
 * exactly however late its buffer came (a CUPTI that delivers only at exit included). The window is
 * TKP_MODEL_LATE_FLUSHES x the capture's flush period (META config.flush_ms: the shim hands CUPTI
 * buffers and chunks over at that period, so a record later than a few periods is lost, not
 * late), TKP_MODEL_LATE_NS when the capture does not say. Then its GPU busy
 * time (the union of its kernel intervals over all streams: sort by start, sweep), launch latency
 * and per-name histograms are computed and the intervals freed. A GPU record that still arrives
 * for a closed step is added approximately (its full duration counts as busy) and counted in
 * `late`. The capture's end closes everything.
 *
 * Memory: O(steps x classes) for the step table, O(distinct names x TKP_HIST_BUCKETS) for the
 * name histograms, plus the open steps' records (the records of one window of host time: 2 s at
 * the default flush period; at most TKP_MODEL_AWAIT_MAX steps' when GPU records come later than
 * that) — never O(records) of the whole capture.
 *
 * Percentiles of kernel durations come from a per-name (and per-class) histogram of geometric
 * buckets 2% wide; a percentile reports its bucket's geometric midpoint clamped to the observed
 * [min, max], so its relative error is at most 1% (sqrt(1.02) - 1). Counts, totals, means, min
 * and max are exact. */
#ifndef TKP_MODEL_H
#define TKP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/map.h"
#include "model/classes.h"
#include "model/hist.h"

struct tkp_reader;
struct tkp_record;
struct tkp_launch_bulk;
struct tkp_run_full;

#define TKP_MODEL_LATE_FLUSHES 10        /* the watermark window, in flush periods: see above */
#define TKP_MODEL_LATE_NS 2000000000ull /* 10x the default flush period of 200 ms */
#define TKP_MODEL_AWAIT_MAX 4096         /* open steps past which none awaits late GPU records */
#define TKP_MSTEP_OPEN 3                /* a step whose STEP record never came (cut capture) */
#define TKP_MODEL_GRAPHS_MAX 65536      /* graph topologies kept; later ones count as unknown */
#define TKP_MODEL_GRAPH_NODES_MAX (16u << 20) /* their nodes, all together (64 MiB of slots) */

struct tkp_model_opts {
    const struct tkp_classes *classes; /* required; not owned */
    /* Which steps feed the per-name and per-class figures (the step table has them all):
     * token indices [from, to] (-1: unbounded), and one OS thread id (0: all). Records of
     * outside segments are counted only when neither from nor to is given. */
    int64_t from, to;
    uint32_t tid;
    /* 1: no per-name and per-class GPU duration figures (names[].d, cls, kernel_ns_total stay
     * empty): for a reader of the step table alone (tokprof table) */
    int no_dists;
    /* 1: steps count their kernels per class too (class_n): for tokprof table's step_classes */
    int class_counts;
};

struct tkp_mopen; /* an open step's records, internal to model.c */

struct tkp_mstep {
    uint32_t thread, tid; /* thread: unique per process in a merged reader (multireader.h) */
    uint64_t pid;         /* the process (META pid) */
    uint64_t seg;     /* segment index on the thread */
    int64_t index;    /* token index on the thread (0, 1, ...), -1 for outside or open steps */
    int kind;         /* TKP_STEP_TOKEN, _OUTSIDE, _WARMUP or TKP_MSTEP_OPEN */
    uint32_t closed_by;
    uint64_t begin_ns, mark_ns, end_ns; /* 0 when open */
    uint64_t launches, graph_launches, copies;
    int has_gap;
    int64_t gap_ns;   /* next step's begin_ns - this end_ns on the same thread (< 0: overlap) */
    uint64_t itl_ns;  /* a token step's inter-token latency (tkp_itl_ns), 0 none; set by
                         tkp_model_finish */
    /* GPU (meaningful when gpu_kernels > 0) */
    uint64_t gpu_kernels, gpu_copies;
    uint64_t gpu_first_ns, gpu_last_ns; /* span: first kernel start .. last kernel end */
    uint64_t busy_ns;                   /* union of kernel intervals */
    uint64_t copy_ns;                   /* sum of GPU copy and memset durations */
    uint64_t lat_n, lat_sum_ns, lat_max_ns; /* launch -> GPU start, over kernels paired */
    uint64_t *class_ns;                 /* kernel time per class id (model-owned, in blocks) */
    uint64_t *class_n;                  /* kernels per class id, with opts.class_counts (else NULL) */
    struct tkp_mopen *open;             /* NULL once closed */
    /* Per-step extras, read through analysis.h (tkp_acc_step): the largest n and m of the step's
     * executed unbatched GEMMs and those of its last one, and its GPU idle split. */
    uint64_t gemm_max_n, gemm_max_m, gemm_last_n, gemm_last_m, gemm_last_ns;
    /* The largest token count its kernels' names carry (tok_cols), and whether one said "more"
     * (set at close when the capture has such names: model has_tok_cols). */
    uint32_t kern_tokens;
    int kern_many;
    uint64_t launch_gap_ns, wait_ns;
    /* The host's side (figures.h, the verdict): time blocked in its syncs (SYNC wait_ns), and in
     * launch calls (tkp_launch_paced over the gaps between its consecutive launches, set at
     * close). */
    uint64_t sync_ns, launch_ns;
    int lib_only; /* only LIB_CALL records so far: not a step of the table (dropped at finish) */
};

struct tkp_mname {
    uint64_t name_id;
    char *name;  /* owned */
    int cls;
    int tok_cols;      /* tkp_kernel_token_cols (libcalls.h): tokens the name carries, -1 many */
    uint64_t launches; /* host launches (eager + graph nodes), for captures without GPU records */
    struct tkp_dist d; /* GPU durations */
};

/* A GEMM weight (a_ptr), the m and n it was first seen with, and whether its m or n varied: the
 * token dimension vote (analysis.h). */
struct tkp_mweight {
    uint64_t a, m, n;
    unsigned char mvar, nvar;
};

struct tkp_model {
    struct tkp_model_opts opts;
    int nclasses;
    struct tkp_mstep *steps; /* after finish: sorted by (thread, seg) */
    size_t nsteps, cap_steps;
    struct tkp_mname *names;
    size_t nnames, cap_names;
    struct tkp_dist *cls; /* per class id: its names' (names[].d) summed by tkp_model_finish */
    /* GPU availability: the last GPU_INFO, and records seen */
    int has_gpu_info;
    uint32_t gpu_status;
    char gpu_mode[64], gpu_reason[192];
    uint64_t gpu_records, gpu_dropped, unjoined, late, bad_joins;
    uint64_t kernel_ns_total; /* sum of kernel durations in the per-name figures */
    uint64_t now_ns;          /* the watermark clock */
    uint64_t late_ns;         /* the watermark window */
    /* internal */
    struct tkp_mthread *threads;
    uint32_t nthreads;
    size_t *openlist;
    size_t nopen, cap_open;
    struct tkp_map name_ix; /* names by name id */
    uint32_t *id2slot; /* slot + 1 by name id, for ids below TKP_MODEL_DIRECT_IDS */
    size_t id2slot_cap;
    struct tkp_mopen *spare; /* closed steps' buffers, reused by the next steps (a list) */
    struct tkp_mstep *last; /* step_at's cache: the previous record's step (NULL: none) */
    size_t gpu_step;        /* the previous GPU kernel's step: its index + 1 (0: none) */
    struct tkp_mopen *fast; /* the launch fast path's step (open, tid known): its buffers, */
    uint32_t fast_thread;   /* thread and segment; NULL when that step closes */
    uint64_t fast_seg;
    struct tkp_mgraph *graphs;
    size_t ngraphs, cap_graphs, graph_nodes;
    struct tkp_map graph_ix; /* graphs by graph id */
    uint64_t chunks;
    uint64_t pid; /* of the record being added */
    size_t hint_l, hint_g, hint_k; /* a new step's buffers: the records of the last ended one */
    struct tkp_mcblock *cblocks;   /* the steps' class_ns, by blocks of steps */
    struct tkp_moblock *oblocks;   /* the open steps' records (struct tkp_mopen), by blocks */
    uint64_t *cls_next;
    size_t cls_left;
    struct tkp_mweight *w; /* GEMM weights, in order seen: the token dimension vote */
    size_t nw, wcap;
    struct tkp_map w_ix;         /* w by a_ptr */
    uint32_t w_recent[256];      /* w's index + 1 of an a_ptr seen lately, by its hash (model.c) */
    /* the records tkp_model_add_run() took last: their least host time above 0 less 1 (UINT64_MAX
     * when none is above 0), their greatest, their library calls */
    uint64_t run_lo1, run_hi, run_libs;
    int has_tokens, token_dim_m; /* an executed GEMM seen; tokens are its m (else its n) */
    int has_tok_cols;            /* a kernel name carries tokens (tkp_kernel_token_cols) */
    int finished;
};

void tkp_model_init(struct tkp_model *m, const struct tkp_model_opts *opts);
/* Feeds one record. Returns 0 or TKP_ERR_NOMEM. */
int tkp_model_add(struct tkp_model *m, const struct tkp_record *r);
/* Launches in bulk (reader.h, tkp_reader_peek_launches): takes the first of b's n launches as
 * tkp_model_add() would take their records, while it can without the whole record (a launch of
 * the step of the previous one, of a name it knows, with room in the step's buffer), and returns
 * how many it took; the rest, from the first it did not take, go through tkp_model_add(). */
size_t tkp_model_add_launches(struct tkp_model *m, const struct tkp_launch_bulk *b, size_t n);
/* The same over launches and library calls (reader.h, tkp_reader_peek_full: the reader's columns
 * in place, a launch's name id from its template): a library call as tkp_model_add() takes it
 * while it needs no step lookup (of the step of the last record the model looked up, room in the
 * weights table). The records it took: their times and library calls in m->run_lo1, run_hi and
 * run_libs. At most TKP_LAUNCH_BULK records a call. The launches' gaps are folded into their step's launch-call time as they come
 * (tkp_launch_paced from the thread's min1 as the fold expects it at the step's close; the close
 * walks the launches again where that expectation failed). */
size_t tkp_model_add_run(struct tkp_model *m, const struct tkp_run_full *b, size_t n);
/* Closes every open step, sorts the steps by (thread, seg), fills gaps. Returns 0 or NOMEM. */
int tkp_model_finish(struct tkp_model *m);
/* Decides the token dimension (token_dim_m) from the GEMM weights seen so far; finish does it
 * once the stream ended. A reader of an unfinished model's steps (tkp_tab_tail) calls it before
 * asking for tokens. */
void tkp_model_vote(struct tkp_model *m);
void tkp_model_free(struct tkp_model *m);

/* The step (thread, seg), NULL when the model has none; during the pass or after finish. */
const struct tkp_mstep *tkp_model_step(const struct tkp_model *m, uint32_t thread, uint64_t seg);
/* While step (thread, seg) is open: the host time of its launch (join TKP_JOIN_LAUNCH) or graph
 * launch (TKP_JOIN_GRAPH_LAUNCH) number `index`. 1 found, 0 not. */
int tkp_model_launch_ns(const struct tkp_model *m, uint32_t thread, uint64_t seg, uint32_t join,
                        uint32_t index, uint64_t *ns);


/* 1 when the capture has GPU records; else 0 and `why` gets the reason ("TOKPROF_GPU=off", ...). */
int tkp_model_gpu(const struct tkp_model *m, char *why, size_t n);

/* Step figures helpers: host duration (end - begin, 0 when open), GPU span, idle. */
uint64_t tkp_mstep_host_ns(const struct tkp_mstep *s);
uint64_t tkp_mstep_span_ns(const struct tkp_mstep *s);

/* The verdict's launch-call time (figures.h): of a gap between two consecutive launches of a step,
 * up to a launch call's cost is the call, the rest the host's own code. That cost: the larger of
 * TKP_LAUNCH_CALL_NS (a launch call on a current driver takes 2-10 us, a framework's own code
 * between two launches more: PyTorch's dispatch ~10-50 us) and TKP_LAUNCH_PACED x the thread's
 * smallest such gap so far (*min1, that gap + 1; 0: none yet; updated), for calls slower than
 * that (call stacks sampled at every launch, an old driver). */
#define TKP_LAUNCH_PACED 2
#define TKP_LAUNCH_CALL_NS 10000u
static inline uint64_t tkp_launch_cap(uint64_t min1) /* the cap of a gap, min1 set */
{
    uint64_t cap = TKP_LAUNCH_PACED * (min1 - 1);
    return cap < TKP_LAUNCH_CALL_NS ? TKP_LAUNCH_CALL_NS : cap;
}
static inline uint64_t tkp_launch_paced(uint64_t gap, uint64_t *min1)
{
    if (!*min1 || gap + 1 < *min1) *min1 = gap + 1;
    uint64_t cap = tkp_launch_cap(*min1);
    return gap < cap ? gap : cap;
}

/* Inter-token latency, the one rule (summary, steps, the fleet tables, live): the end of a token
 * step less the end of its thread's previous token step (prev_end, 0 when none); 0 when none or
 * not after it. */
static inline uint64_t tkp_itl_ns(uint64_t prev_end, uint64_t end)
{
    return prev_end && end > prev_end ? end - prev_end : 0;
}

/* Whether step s's GPU figures (busy, span, idle, copy time, class times) are known: it has GPU
 * records, or it sent nothing to the GPU (no launch, graph launch or copy: its GPU time is 0).
 * A step that launched work and has no GPU record was not timed (TOKPROF_GPU=window:N/M outside
 * its window, trigger before a trigger, off, CUPTI unavailable or its records lost): every view
 * shows its GPU figures as unknown (null, '-'), never 0, and leaves it out of GPU percentiles and
 * means. Meaningful only when the capture has GPU records (tkp_model_gpu). */
static inline int tkp_mstep_timed(const struct tkp_mstep *s)
{
    return s->gpu_kernels || s->gpu_copies || !(s->launches || s->graph_launches || s->copies);
}

/* The class with the most GPU time in the step, -1 when it has none. */
int tkp_mstep_top_class(const struct tkp_model *m, const struct tkp_mstep *s);
/* "token", "outside", "warmup", "part" or "open". */
const char *tkp_mstep_kind_str(int kind);

/* META config.flush_ms of a META record, 0 when absent: how often the shim hands over GPU
 * records, which bounds how late they can arrive after their step. */
uint64_t tkp_meta_flush_ms(const struct tkp_record *r);

#endif
