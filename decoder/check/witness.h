/* tokprof check: judgements and witnesses (witness.c): the records that show a violation and its
 * near misses. (The run's verdict, gpu- or launch-bound, is model/figures.h's.) */
#ifndef TKP_CHECK_WITNESS_H
#define TKP_CHECK_WITNESS_H

#include "check/monitor_int.h"

/* Near misses (witness.c): called by a tracked `once` at each point it updates. */
void tkp_near_note(struct tkp_eval *E, const struct tkp_nearplan *np, struct tkp_tstate *t,
                   int v, int64_t now);

/* witness.c: a judgement that is not a pass (t 0 violated, -1 inconclusive) */
void tkp_judge(struct tkp_mon *m, struct tkp_eval *E, int as, int t, const struct tkp_sstep *s,
               const struct tkp_srec *r, const struct wctx *W);
/* the top steps of a violated run assertion's aggregates */
void tkp_run_witness(struct tkp_mon *m, int as);
/* the kept record-level violations of segment seg of thread t, which closed as set-up */
void tkp_setup_mark(struct tkp_mon *m, uint32_t t, uint64_t seg);

/* Counts an evaluation of assertion as (t: 1 passed, 0 violated, -1 inconclusive) and judges it
 * when it did not pass. */
static inline void tkp_evaluated(struct tkp_mon *m, struct tkp_eval *E, int as, int t,
                                 const struct tkp_sstep *s, const struct tkp_srec *r,
                                 const struct wctx *W)
{
    m->res[as].evaluated++;
    if (t != 1) tkp_judge(m, E, as, t, s, r, W);
}

#endif
