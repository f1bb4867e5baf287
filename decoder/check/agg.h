/* tokprof check: aggregates (agg.c), folding values over steps and runs. */
#ifndef TKP_CHECK_AGG_H
#define TKP_CHECK_AGG_H

#include "check/monitor_int.h"

/* Folding a step aggregate (agg.c). */
void tkp_fold_reset(struct tkp_fold *f, const struct tkp_node *x);
int tkp_fold_take(struct tkp_fold *f, const struct tkp_slotplan *p, const struct tkp_node *x,
                  struct tkp_eval *E);
struct tkp_val tkp_fold_value(struct tkp_fold *f, const struct tkp_node *x);

int tkp_vec_push(struct vec *v, const struct tkp_srec *r);
/* agg.c */
int tkp_fold_vec(struct tkp_mon *m, struct tkp_eval *E, const struct vec *recs, const int *slots,
                 int n);
int tkp_fold_runs(struct tkp_mon *m, struct tkp_eval *E, int gpu);
void tkp_runs_finalize(struct tkp_mon *m);

#endif
