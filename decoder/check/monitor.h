/* tokprof check: the streaming monitor. Feed it every record the reader delivers, then finish;
 * it keeps per thread the open steps' records, a constant-size state per assertion and, while
 * GPU time is awaited, a constant-size summary per step (see docs/SPEC.md "Evaluation"). */
#ifndef TKP_CHECK_MONITOR_H
#define TKP_CHECK_MONITOR_H

#include <stdint.h>

#include "check/trace.h"
#include "capture/reader.h"

#define TKP_WIT_MAX 64 /* witness records kept per violation */

struct tkp_witem {
    char role[16]; /* "match", "first", "last", "longest", "gap", "this", "step_top", "near_miss" */
    struct tkp_srec r;      /* "step_top", a step's "near_miss": r.step/token/thread/host_ns */
    uint64_t gap_ns, gap_start; /* role "gap": the hole before r */
    uint32_t before_id_valid;
    struct tkp_srec before; /* role "gap": the kernel that ended the gap's start */
    double value;           /* role "step_top": the step's value */
    /* role "near_miss": a point where the operand of `once` (node) held, sat of nconj
     * conjuncts; fail is the first conjunct that did not (-1: all held, but the point lies
     * outside the window), with observed/bound/margin when that conjunct is a numeric bound
     * (for a point outside the window: its distance against the window, in unit) */
    int node, fail, sat, nconj, is_step, unit, has_margin;
    double observed, bound, margin;
    int64_t distance; /* points (or ns) before the violation */
};

struct tkp_viol {
    int as;
    int inconclusive;
    int setup;        /* a record of a set-up segment (a STEP record of another kind): no token */
    uint32_t thread, tid;
    uint64_t step, token, rec_id;
    uint64_t host_start, host_end, gpu_start, gpu_end;
    int has_gpu, has_val;
    double observed, bound, margin;
    int nw;
    uint64_t matched; /* count witnesses: how many records matched in all */
    char note[200];
    struct tkp_witem w[TKP_WIT_MAX];
};

struct tkp_ares {
    uint64_t evaluated, violations, inconclusive;
    int has_worst;
    double worst_obs, worst_bound, worst_margin;
    struct tkp_viol *first, *worst; /* witness-count entries each */
    int nfirst, nworst;
    int why;                /* enum tkp_inconclusive: why its first inconclusive evaluation was */
    char unknown_note[160]; /* the same in words, naming the value that was unknown */
};

/* Why an assertion is inconclusive (the table's last line groups them). */
enum tkp_inconclusive {
    TKP_WHY_NONE,
    TKP_WHY_GPU_OFF,   /* it reads GPU time and the capture has none (TOKPROF_GPU=off) */
    TKP_WHY_GPU_MISS,  /* it reads GPU time a step or record does not have */
    TKP_WHY_LIB,       /* a library field (r.m, r.op, ...) of a record outside a library call */
    TKP_WHY_VALUE,     /* another value it reads is unknown (prev at the first point, ...) */
    TKP_WHY_NEVER,     /* never judged: no point passed its guard and warm-up */
    TKP_WHY_COUNT_
};
/* A phrase for enum tkp_inconclusive ("no GPU time in the capture (TOKPROF_GPU=off)"). Inline:
 * the monitor, the witnesses and the printers all name reasons, and witness.c must not call into
 * monitor.c. */
static inline const char *tkp_why_str(int why)
{
    switch (why) {
    case TKP_WHY_GPU_OFF: return "no GPU time in the capture (TOKPROF_GPU=off)";
    case TKP_WHY_GPU_MISS: return "GPU time missing where it was read (no GPU record came)";
    case TKP_WHY_LIB: return "a library field read on a record outside a library call";
    case TKP_WHY_NEVER: return "never judged: no point passed its guard and warm-up";
    default: return "a value it reads is unknown";
    }
}

struct tkp_mon;

int tkp_mon_new(const struct tkp_spec *sp, struct tkp_mon **out);
/* baseline run aggregate values (by run slot) and JSON figures (by node); either NULL */
void tkp_mon_set_baseline(struct tkp_mon *m, const struct tkp_val *runs, const double *figures);
int tkp_mon_feed(struct tkp_mon *m, const struct tkp_record *rec);
/* (a reader's records in bulk: check/bulk.h tkp_mon_read) */
/* Internal, for check/bulk.c: a decoded host record x of thread h whose shape e has a plan
 * (e->plan): its record-level assertions, by the shape's verdicts (monitor_int.h's types). */
struct thr;
struct tkp_shape;
struct open_step;
void tkp_eval_shape(struct tkp_mon *m, struct thr *h, struct tkp_srec *x, struct tkp_shape *e);
/* Internal, for check/bulk.c: the `prev`s planned shape e decides updated at E's point
 * (monitor_int.h struct tkp_pdec, tkp_pdec_set). */
struct tkp_eval;
void tkp_pdec_apply(const struct tkp_mon *m, struct tkp_eval *E, const struct tkp_shape *e);
/* Internal, for check/bulk.c: a decoded host record x of open step o to the streamed aggregates
 * and, when a buffered one's prefilter takes it, to the step's buffer (host_full's last part);
 * the counts of atoms as its shape e says, when e is planned (else NULL). */
int tkp_host_aggs(struct tkp_mon *m, struct open_step *o, struct tkp_srec *x,
                  const struct tkp_shape *e);
/* Internal, for check/bulk.c: what a library call (its fields c, its id call, in segment step)
 * changes of its thread h before it is a host record: the call a launch inside it reads, the
 * step's token dimension. */
int tkp_lib_call(struct tkp_mon *m, struct thr *h,
                 const __typeof__(((struct tkp_record *)0)->lib_call) *c, uint32_t call,
                 uint64_t step);
int tkp_mon_finish(struct tkp_mon *m);
const struct tkp_ares *tkp_mon_result(const struct tkp_mon *m, int as);
/* The verdict of assertion as: 1 pass, 0 violated, -1 inconclusive (some evaluation was, or it
 * was never judged). *why is its enum tkp_inconclusive. */
int tkp_mon_verdict(const struct tkp_mon *m, int as, int *why);
/* run aggregate values after finish, by run slot (for a baseline pass) */
const struct tkp_val *tkp_mon_runs(const struct tkp_mon *m);
struct tkp_mon_stats {
    uint64_t records, steps, gpu_records, late, unclosed, pending_peak, buffered_peak, threads;
    uint64_t state_bytes; /* the assertions' state per thread (tkp_assert.state_bytes) */
    uint64_t shapes;      /* distinct record shapes whose atoms were computed (prog.h) */
};
const struct tkp_mon_stats *tkp_mon_stats(const struct tkp_mon *m);
void tkp_mon_free(struct tkp_mon *m);

#endif
