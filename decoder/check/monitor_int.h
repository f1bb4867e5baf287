/* tokprof check: the monitor's internals, shared by its three parts:
 *   monitor.c  records in, steps open and close, which assertion is judged when;
 *   agg.c      step and run aggregates folded over records and steps;
 *   witness.c  verdicts: margins, the kept violations and their witnesses, near misses. */
#ifndef TKP_CHECK_MONITOR_INT_H
#define TKP_CHECK_MONITOR_INT_H

#include "check/eval.h"
#include "check/monitor.h"
#include "check/prog.h"

#define TKP_MON_OPEN_MAX 4 /* open steps per thread before the oldest is closed without STEP */
#define PEND_MAX 65536    /* steps awaiting GPU records per thread; beyond, the oldest closes */

struct vec {
    struct tkp_srec *v;
    uint32_t n, cap;
};

/* A step whose STEP record has not come yet. */
struct open_step {
    int used;
    uint64_t seg;
    uint64_t len, launches;      /* host records; LAUNCH and GRAPH_LAUNCH among them */
    uint64_t work;               /* launches, copies and memsets among them */
    struct tkp_srec first, last; /* the first host record; the latest (records decode into it) */
    int last_lazy;               /* last holds only its shape: the record is last_raw */
    uint64_t last_id;
    struct tkp_record last_raw;
    struct tkp_sstep part;       /* what streamed aggregates read of the step: idx, thread */
    struct vec host;             /* the records a buffered aggregate may take */
    struct vec gpu;              /* GPU records that came before the step closed */
    uint64_t tok_max, tok_last;  /* GEMM token dimension: phase of the step */
    struct tkp_fold *fold;       /* streamed step aggregates, by slot */
};

/* A step closed on the host, awaiting its GPU records. */
struct pend {
    struct tkp_sstep s;
    struct tkp_val *aggs;
    struct vec gpu;
    struct tkp_srec first, last;
};

struct thr {
    struct open_step open[TKP_MON_OPEN_MAX];
    struct open_step *cur; /* the open step of the thread's latest record */
    struct tkp_tstate *ts;
    uint64_t tokens, outside, recs, last_closed;
    int had_decode, seen, gpu_seen;
    uint32_t tid;
    uint64_t pid;
    uint32_t call; /* the thread's latest LIB_CALL */
    uint64_t setup[8]; /* the latest set-up segments (STEP of another kind), for GPU records */
    uint32_t nsetup;   /* set-up segments closed in all (setup[] holds the last 8) */
    struct tkp_srec lib;
    struct pend *pend;
    uint32_t npend, pend_head, pend_cap;
};

/* A host record-level assertion as a shape's plan runs it (tkp_eval_shape), by position in
 * rec_host. */
struct rhost {
    const struct tkp_nbound *bound; /* its body's straight form, NULL: run body_prog */
    const struct tkp_ins *bins;     /* else body_prog's one-byte instructions (tkp_bool_ins) */
    int as, body_prog, when_prog;
    /* a body `A -> B` whose A the shape decides (struct tkp_assert imp_prog): B's program and
     * straight form, which a shape making A true (its TKP_FAST_BODY) runs alone; -1 none */
    const struct tkp_nbound *cbound;
    int cons_prog;
    int imp_prog; /* and A's when the body holds `prev`s (run as A and B: tkp_truth_imp), else -1 */
    uint64_t skip;
};

/* The `prev`s a shape's host records update whose operand the shape decides (`prev kern`):
 * their state slots, those the operand is true (vt) and unknown (vu) on; the shape's pmarks
 * keep the others (eval.h tkp_prev_decided). */
struct tkp_pdec {
    uint64_t slots, vt, vu, in_step;
};

struct tkp_mon {
    const struct tkp_spec *sp;
    struct thr *t;
    uint32_t nt;
    struct tkp_ares *res;
    int *run_node, *run_owner;
    struct tkp_val *aggs;       /* the step aggregates of the step being judged */
    struct tkp_val *runs;       /* run aggregates (finalised at the end) */
    double *run_acc;            /* per run slot: sum, count, min, max (4 each) */
    uint8_t *run_unk;           /* per run slot: a judged step's selection or value was unknown */
    double **run_vals;          /* pNN: every value (8 B per step) */
    uint64_t *run_nvals, *run_capvals;
    struct tkp_witem **run_top; /* the top-k steps per run slot */
    int *run_ntop;
    const struct tkp_val *base;
    const double *figures;
    struct tkp_shapes *shapes;
    int need_gpu;
    struct tkp_fold *fold;      /* buffered and GPU slots, folded at a close */
    /* what runs when: assertion indices by level and phase, step slots by how they fold */
    int *rec_host, *rec_gpu, *step_host, *step_gpu;
    int nrec_host, nrec_gpu, nstep_host, nstep_gpu;
    int *stream, *buffered, *gpu_slots;
    int nstream, nbuffered, ngpu_slots;
    uint64_t gpu_off[16];       /* processes whose GPU_INFO says no GPU records will come */
    int ngpu_off;
    struct tkp_mon_stats st;
    uint64_t next_id;
    struct tkp_srec gpu_rec;    /* the GPU record being judged */
    struct tkp_eval er, es;     /* contexts of a record: its record-level assertions (temporal
                                   state advances), its streamed aggregates (r and the step) */
    int rec_none; /* nothing reads host records: no record-level assertion, no step aggregate */
    uint64_t *rec_skip;         /* by position in rec_host: warm-up steps */
    struct rhost *rh;           /* by position in rec_host */
    int rec_warm;               /* a host record-level assertion has a warm-up (skip) */
    uint64_t bulk_all, bulk_ones;  /* RUN records fed in bulk; of them, judged one by one */
    int bulk_off;                  /* too few from the columns: one by one from now on */
    uint64_t hit_slots;         /* temporal slots whose shape marks are a window's hits (they read
                                   the record: tkp_shape_marks) */
    struct tkp_ins **resid;     /* by shape id * nrec_host + position in rec_host: the residual
                                   (tkp_residual) on the shape of the one-byte program its plan
                                   runs (the body, or A of `A -> B` with `prev`s), NULL none */
    uint8_t *rform;             /* by the same index: the residual's form (tkp_resid_form) */
    size_t nresid;
    struct tkp_pdec *pdec;      /* by shape id: the host `prev`s its shape decides (shape_prevs) */
    size_t npdec;
};

/* Updates the `prev`s shape e decides (struct tkp_pdec) at E's point (monitor.h
 * tkp_pdec_apply). */
static inline void tkp_pdec_set(const struct tkp_mon *m, struct tkp_eval *E,
                                const struct tkp_shape *e)
{
    if (e->pdec) tkp_pdec_apply(m, E, e);
}

/* What a step-level violation's witness draws from. */
struct wctx {
    const struct vec *host, *gpu;        /* buffered host records; the GPU records */
    const struct tkp_srec *first, *last;
    const struct tkp_fold *fold;         /* streamed aggregates (their kept records), by slot */
};

static inline uint32_t tkp_prod3(const uint32_t *v) { return v[0] * v[1] * v[2]; }

/* The fields of a record that make its shape (prog.h), and its token: all a record needs when
 * its shape decides everything about it. */
static inline __attribute__((always_inline)) void tkp_decode_shape(const struct thr *h,
                                                                   const struct tkp_record *r,
                                                                   struct tkp_srec *x)
{
    x->token = r->step > h->outside ? r->step - h->outside : 0;
    x->op = NULL;
    x->lib = x->dir = 0;
    x->has_lib = x->has_dir = x->sync = x->async = 0;
    x->atoms_ok = 0;
    switch (r->type) {
    case TKP_REC_LAUNCH:
        x->kind = RK_KERNEL, x->name = r->launch.name;
        if (r->launch.call && r->launch.call == h->call)
            x->has_lib = 1, x->lib = h->lib.lib, x->op = h->lib.op;
        break;
    case TKP_REC_GRAPH_LAUNCH: x->kind = RK_GRAPH, x->name = "graph"; break;
    case TKP_REC_COPY:
        x->kind = r->copy.kind == TKP_COPY_MEMSET ? RK_MEMSET : RK_MEMCPY;
        x->name = x->kind == RK_MEMSET ? "memset" : "memcpy";
        x->dir = r->copy.dir, x->has_dir = 1;
        x->async = (r->copy.flags & TKP_COPY_ASYNC) != 0;
        x->sync = !x->async; /* a blocking copy waits for the device */
        break;
    case TKP_REC_SYNC: x->kind = RK_SYNC, x->name = "sync", x->sync = 1; break;
    case TKP_REC_EVENT_RECORD: x->kind = RK_EVENT, x->name = "event"; break;
    case TKP_REC_STREAM_WAIT: x->kind = RK_WAIT, x->name = "wait"; break;
    case TKP_REC_NVTX: x->kind = RK_NVTX, x->name = r->nvtx.name; break;
    case TKP_REC_MARKER: x->kind = RK_MARKER, x->name = "marker"; break;
    case TKP_REC_LIB_CALL:
        x->kind = RK_API, x->name = r->lib_call.op, x->op = r->lib_call.op, x->has_lib = 1;
        x->lib = r->lib_call.lib;
        break;
    default: /* TKP_REC_GPU_KERNEL, TKP_REC_GPU_COPY */
        x->kind = r->type == TKP_REC_GPU_KERNEL ? RK_KERNEL
                  : r->gpu.kind == TKP_COPY_MEMSET ? RK_MEMSET : RK_MEMCPY;
        x->name = r->gpu.name;
        if (r->type == TKP_REC_GPU_COPY) x->dir = r->gpu.dir, x->has_dir = 1;
        break;
    }
    x->small = tkp_shape_small(x);
}

/* The fields of the rest every host record has (the id'th, of thread and step, at host_ns),
 * the others none. */
static inline __attribute__((always_inline)) void tkp_decode_head(uint64_t host_ns, uint64_t step,
                                                                 uint32_t thread, uint64_t id,
                                                                 struct tkp_srec *x)
{
    x->id = id;
    x->host_ns = host_ns;
    x->gpu_start = x->gpu_end = 0;
    x->step = step;
    x->bytes = x->wait_ns = 0;
    x->thread = thread;
    x->pos = 0;
    x->is_gpu = 0;
}

/* The rest of a launch (template l) into x, whose shape is decoded: tkp_decode_rest's, and
 * check/bulk.c's from a RUN's columns. */
static inline __attribute__((always_inline)) void tkp_decode_launch(
    const struct thr *h, const __typeof__(((struct tkp_record *)0)->launch) *l, uint64_t host_ns,
    uint64_t step, uint32_t thread, uint64_t id, struct tkp_srec *x)
{
    tkp_decode_head(host_ns, step, thread, id, x);
    x->stream = l->stream;
    x->grid = tkp_prod3(l->grid), x->block = tkp_prod3(l->block);
    if (x->has_lib) x->m = h->lib.m, x->n = h->lib.n, x->k = h->lib.k, x->batch = h->lib.batch;
    else x->m = x->n = x->k = x->batch = 0;
}

/* The rest of a library call (its fields c) into x, as tkp_decode_launch. */
static inline __attribute__((always_inline)) void tkp_decode_lib(
    const __typeof__(((struct tkp_record *)0)->lib_call) *c, uint64_t host_ns, uint64_t step,
    uint32_t thread, uint64_t id, struct tkp_srec *x)
{
    tkp_decode_head(host_ns, step, thread, id, x);
    x->grid = x->block = 0;
    x->m = c->m, x->n = c->n, x->k = c->k, x->batch = c->batch, x->stream = c->stream;
}

/* Decodes the rest of a record (the id'th) into x, whose shape is decoded: x is reused. A
 * launch reads the thread's library call when its shape says it is inside it. */
static inline void tkp_decode_rest(const struct thr *h, const struct tkp_record *r, uint64_t id,
                                   struct tkp_srec *x)
{
    if (r->type == TKP_REC_LAUNCH) {
        tkp_decode_launch(h, &r->launch, r->host_ns, r->step, r->thread, id, x);
        return;
    }
    if (r->type == TKP_REC_LIB_CALL) {
        tkp_decode_lib(&r->lib_call, r->host_ns, r->step, r->thread, id, x);
        return;
    }
    tkp_decode_head(r->host_ns, r->step, r->thread, id, x);
    x->stream = 0;
    x->m = x->n = x->k = x->batch = 0;
    x->grid = x->block = 0;
    switch (r->type) {
    case TKP_REC_GRAPH_LAUNCH: x->stream = r->graph_launch.stream; return;
    case TKP_REC_COPY: x->bytes = r->copy.bytes, x->stream = r->copy.stream; return;
    case TKP_REC_SYNC: x->wait_ns = r->sync.wait_ns, x->stream = r->sync.handle; return;
    case TKP_REC_EVENT_RECORD: x->stream = r->event_record.stream; return;
    case TKP_REC_STREAM_WAIT: x->stream = r->stream_wait.stream; return;
    case TKP_REC_NVTX: case TKP_REC_MARKER: return;
    default: /* GPU records */
        x->is_gpu = 1;
        x->host_ns = 0;
        x->gpu_start = r->gpu.start_ns;
        x->gpu_end = r->gpu.end_ns > r->gpu.start_ns ? r->gpu.end_ns : r->gpu.start_ns + 1;
        x->stream = r->gpu.stream, x->bytes = r->gpu.bytes;
        if (r->type == TKP_REC_GPU_KERNEL) x->grid = tkp_prod3(r->gpu.grid), x->block = tkp_prod3(r->gpu.block);
        return;
    }
}

static inline void tkp_decode(const struct thr *h, const struct tkp_record *r, uint64_t id,
                              struct tkp_srec *x)
{
    tkp_decode_shape(h, r, x);
    tkp_decode_rest(h, r, id, x);
}

/* Segment seg of thread h closed as a set-up segment: it has no token. */
static inline int tkp_is_setup(const struct thr *h, uint64_t seg)
{
    for (uint32_t i = 0; i < h->nsetup && i < 8; i++)
        if (h->setup[i] == seg) return 1;
    return 0;
}

/* No GPU record will come for thread t (-1: for any thread): its GPU_INFO said so, none came.
 * Inline: the monitor and the witnesses ask it, and witness.c must not call into monitor.c. */
static inline int tkp_gpu_off(const struct tkp_mon *m, int t)
{
    if (t < 0) return m->ngpu_off && !m->st.gpu_records;
    const struct thr *h = &m->t[t];
    if (h->gpu_seen) return 0;
    for (int i = 0; i < m->ngpu_off; i++)
        if (m->gpu_off[i] == h->pid) return 1;
    return 0;
}

#endif
