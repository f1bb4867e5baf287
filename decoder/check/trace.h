/* tokprof check: the trace model assertions see (docs/SPEC.md "Trace model"), the three-valued
 * values they compute with, and the evaluator.
 *
 * A struct tkp_srec is one host record (LAUNCH, GRAPH_LAUNCH, COPY, SYNC, EVENT_RECORD,
 * STREAM_WAIT, NVTX, MARKER, LIB_CALL) or one GPU record (GPU_KERNEL, GPU_COPY), flattened so
 * predicates read fields without a switch on the type. Unknown fields (GPU time of a host
 * record, library fields of a launch outside any library call) evaluate to "unknown", never to
 * 0: an assertion that reads them is inconclusive rather than passing by accident. */
#ifndef TKP_CHECK_TRACE_H
#define TKP_CHECK_TRACE_H

#include <stdint.h>

#include "check/ast.h"

enum tkp_rkind { RK_KERNEL, RK_GRAPH, RK_MEMCPY, RK_MEMSET, RK_SYNC, RK_EVENT, RK_WAIT, RK_NVTX,
                 RK_MARKER, RK_API, RK_COUNT_ };

struct tkp_srec {
    uint64_t id;      /* ordinal of the record in the capture, from 1 */
    uint64_t host_ns; /* 0 for GPU records */
    uint64_t gpu_start, gpu_end; /* 0 when unknown */
    uint64_t step, token;
    uint64_t stream, bytes, wait_ns;
    uint64_t m, n, k, batch; /* library call; 0 unknown */
    const char *name;        /* valid until the reader closes */
    const char *op;          /* library op, NULL when none */
    uint32_t thread, pos, kind, dir, lib, grid, block;
    uint8_t is_gpu, sync, async, has_lib, has_dir;
    uint32_t small;          /* its shape's small fields, packed (prog.h tkp_shape_small) */
    uint32_t gfalse;         /* record-level assertions (by fast bit) that run for their
                                temporal state alone: the shape decides the guard false */
    uint8_t atoms_ok;        /* akn/atr/fast hold the record's atoms (prog.h) */
    uint64_t akn, atr;       /* atom k: bit k known, bit k true */
    uint64_t fast;           /* record-level assertions this shape decides (prog.h) */
    uint64_t marks[2];       /* and the unbounded `once`s it makes hold, by state slot, of
                                the assertions on host [0] and on GPU records [1] */
    uint64_t pmarks[2];      /* and the `prev`s it updates without running their body (prog.h) */
};

enum tkp_phase { PH_UNKNOWN, PH_PREFILL, PH_DECODE, PH_MIXED };

struct tkp_sstep {
    uint32_t thread, tid;
    uint64_t idx, token;         /* segment index, token index on the thread */
    uint64_t start, mark, end;   /* host clock: STEP begin/mark/end */
    uint64_t len, launches;      /* host records of the step, LAUNCH + GRAPH_LAUNCH */
    uint64_t work;               /* its host records that put work on the GPU (launches,
                                    copies, memsets): GPU records are owed for them */
    int phase;                   /* enum tkp_phase */
    int has_gpu;                 /* GPU records of the step arrived */
    uint64_t gpu_start, gpu_end, busy, maxgap;
    uint64_t first_id, last_id;  /* first and last host record */
};

enum tkp_vt { VT_UNK, VT_NUM, VT_BOOL, VT_STR };
struct tkp_val {
    int t;
    double n; /* NUM, BOOL (0/1) */
    const char *s;
};

/* Cross-point state of one temporal operator on one thread. */
struct tkp_tstate {
    int64_t last, first;   /* point (step/record index or ns) of the latest/earliest hit */
    uint8_t valid, prev_set;
    uint8_t prev_first;    /* prev: its latest read had no previous point (unknown) */
    uint8_t ring_used;     /* ring holds values (ring_at is meaningful) */
    uint8_t nnear, has_hit; /* near misses kept in near[], the window's hit in near[TOP] */
    struct tkp_val prev;   /* prev: the operand at the previous point */
    struct tkp_val prev_out; /* prev: what the latest updating read returned (a witness re-reads it) */
    uint8_t *ring;         /* bounded [a,b] in steps/records: the last b+1 operand values */
    uint32_t ring_len;
    int64_t ring_at;       /* point index of ring's newest slot */
    int64_t scope;         /* 'in step': the step the state belongs to */
    struct tkp_near *near; /* a tracked `once` (prog.h): TKP_NEAR_TOP + 1 entries */
};

/* What one evaluation sees. */
struct tkp_shapes;
struct tkp_nearplan;
struct tkp_tstate;
struct tkp_eval {
    const struct tkp_spec *sp;
    struct tkp_srec *r;        /* NULL at step and run level (outside aggregates) */
    const struct tkp_sstep *s; /* NULL at run level (outside aggregates) */
    const struct tkp_val *aggs; /* step aggregate values by slot */
    const struct tkp_val *runs; /* run aggregate values by slot (run level) */
    const struct tkp_val *base; /* baseline run aggregate values, NULL when none */
    struct tkp_tstate *ts;     /* temporal states of this thread, by slot */
    int64_t point;             /* step index (step level) or record ordinal (record level) */
    int64_t now_ns;            /* time of the point */
    int64_t scope;             /* current step, for 'in step' */
    struct tkp_shapes *shapes; /* atoms by record shape (prog.h), may be NULL */
    const double *figures;     /* --baseline JSON figures by OP_BASE_KEY slot */
    int update;                /* 1: temporal states advance (once per point) */
    /* where a tracked `once` notes a near miss while update is on: witness.c's tkp_near_note,
     * set by the monitor (the evaluator must not call up into the witness code that calls it);
     * NULL: none */
    void (*near_note)(struct tkp_eval *E, const struct tkp_nearplan *np, struct tkp_tstate *t,
                      int v, int64_t now);
    /* class results of record cls_r in step cls_s (classes are record predicates without
     * state: one evaluation per record and context, whatever tests them); bit = class index */
    const struct tkp_srec *cls_r;
    const struct tkp_sstep *cls_s;
    uint64_t cls_done, cls_val;
};

#endif
