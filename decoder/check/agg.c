/* tokprof check: aggregates. A step aggregate folds the records of one step (as they arrive when
 * streamed, else at the step's close over the buffered ones); a run aggregate folds one value
 * per judged step, and keeps the top steps as its witness. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check/monitor_int.h"
#include "base/grow.h"
#include "base/sort.h"
#include "check/eval.h"
#include "check/agg.h"

static const struct tkp_val UNK = {VT_UNK, 0, NULL};

int tkp_vec_push(struct vec *v, const struct tkp_srec *r)
{
    if (TKP_GROW_FROM(v->v, v->cap, (size_t)v->n + 1, 256)) return TKP_ERR_NOMEM;
    v->v[v->n++] = *r;
    return 0;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct_of(double *v, uint64_t n, double p)
{
    tkp_sort(v, n, sizeof(double), cmpd);
    uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)n);
    return v[rank ? rank - 1 : 0];
}

static int push_value(double **v, uint64_t *n, uint64_t *cap, double x)
{
    if (TKP_GROW_FROM(*v, *cap, *n + 1, 1024)) return TKP_ERR_NOMEM;
    (*v)[(*n)++] = x;
    return 0;
}

/* ---- step aggregates ---- */

void tkp_fold_reset(struct tkp_fold *f, const struct tkp_node *x)
{
    f->acc = x->agg == AG_MIN ? INFINITY : x->agg == AG_MAX ? -INFINITY : 0;
    f->cnt = 0;
    f->first = f->last = UNK;
    f->unknown = 0;
    f->np = 0;
    f->matched = 0;
    f->nkeep = 0;
}

/* One record (E->r) the aggregate takes (p->sel holds) into the fold. */
int tkp_fold_take(struct tkp_fold *f, const struct tkp_slotplan *p, const struct tkp_node *x,
                  struct tkp_eval *E)
{
    if (p->keep) {
        f->matched++;
        if (!f->keep && !(f->keep = malloc(TKP_WIT_MAX * sizeof(*f->keep)))) return TKP_ERR_NOMEM;
        if (f->nkeep < TKP_WIT_MAX) f->keep[f->nkeep++] = *E->r;
    }
    if (x->agg == AG_COUNT || x->agg == AG_EXISTS) {
        f->cnt++;
        return 0;
    }
    struct tkp_val v = p->value >= 0 ? tkp_eval(E, x->a) : UNK;
    if (v.t == VT_UNK) {
        f->unknown = 1;
        return 0;
    }
    if (!f->cnt) f->first = v;
    f->last = v;
    f->cnt++;
    switch (x->agg) {
    case AG_SUM: case AG_MEAN: f->acc += v.n; break;
    case AG_MIN: f->acc = fmin(f->acc, v.n); break;
    case AG_MAX: f->acc = fmax(f->acc, v.n); break;
    case AG_PCT: return push_value(&f->pv, &f->np, &f->cap, v.n);
    }
    return 0;
}

struct tkp_val tkp_fold_value(struct tkp_fold *f, const struct tkp_node *x)
{
    struct tkp_val out = {VT_NUM, 0, NULL};
    switch (x->agg) {
    case AG_COUNT: out.n = f->cnt; break;
    case AG_EXISTS: out.t = VT_BOOL, out.n = f->cnt > 0; break;
    case AG_SUM: out.n = f->acc; break;
    case AG_MEAN: case AG_MIN: case AG_MAX:
        if (!f->cnt) out.t = VT_UNK;
        else out.n = x->agg == AG_MEAN ? f->acc / f->cnt : f->acc;
        break;
    case AG_FIRST: out = f->cnt ? f->first : UNK; break;
    case AG_LAST: out = f->cnt ? f->last : UNK; break;
    case AG_PCT:
        if (!f->np) out.t = VT_UNK;
        else out.n = pct_of(f->pv, f->np, x->num);
        break;
    }
    /* a fold that skipped unknown values (GPU time missing) is not a fact */
    if (f->unknown && x->agg != AG_COUNT) out.t = VT_UNK;
    return out;
}

/* Folds step slots over a step's records into m->aggs, records outer: a record's atoms and
 * classes are computed once for all the slots. */
int tkp_fold_vec(struct tkp_mon *m, struct tkp_eval *E, const struct vec *recs, const int *slots,
                 int n)
{
    const struct tkp_spec *sp = m->sp;
    const struct tkp_code *c = sp->code;
    for (int j = 0; j < n; j++)
        tkp_fold_reset(&m->fold[slots[j]], &sp->n[c->plan[slots[j]].node]);
    for (uint32_t i = 0; recs && n && i < recs->n; i++) {
        E->r = &recs->v[i];
        for (int j = 0; j < n; j++) {
            const struct tkp_slotplan *p = &c->plan[slots[j]];
            int rc = tkp_conj_holds(E, &p->sel)
                         ? tkp_fold_take(&m->fold[slots[j]], p, &sp->n[p->node], E) : 0;
            if (rc) return rc;
        }
    }
    E->r = NULL;
    for (int j = 0; j < n; j++)
        m->aggs[slots[j]] = tkp_fold_value(&m->fold[slots[j]], &sp->n[c->plan[slots[j]].node]);
    return 0;
}

/* ---- run aggregates ---- */

/* One judged step (E->s) into the run slots of its phase. */
int tkp_fold_runs(struct tkp_mon *m, struct tkp_eval *E, int gpu)
{
    const struct tkp_spec *sp = m->sp;
    for (int s = 0; s < sp->nslots_run; s++) {
        int as = m->run_owner[s];
        const struct tkp_assert *a = &sp->as[as];
        if (a->gpu != gpu) continue;
        if (E->s->token < a->skip) continue;
        if (a->when >= 0 && tkp_eval_bool(E, a->when) != 1) continue;
        const struct tkp_node *x = &sp->n[m->run_node[s]];
        /* a step whose selection or value is unknown makes the run's fold unknown, as in a step
         * fold: a count of steps over a 1 ms busy time is not 0 when nothing was timed */
        int w = x->b >= 0 ? tkp_eval_bool(E, x->b) : 1;
        if (w < 0) m->run_unk[s] = 1;
        if (w != 1) continue;
        double *acc = &m->run_acc[4 * s];
        if (x->agg == AG_COUNT || x->agg == AG_EXISTS) {
            int t = x->a < 0 ? 1 : tkp_eval_bool(E, x->a);
            if (t < 0) m->run_unk[s] = 1;
            if (t == 1) acc[1]++;
            continue;
        }
        struct tkp_val v = tkp_eval(E, x->a);
        if (v.t != VT_NUM && v.t != VT_BOOL) {
            m->run_unk[s] = 1;
            continue;
        }
        acc[0] += v.n, acc[1]++;
        acc[2] = fmin(acc[2], v.n), acc[3] = fmax(acc[3], v.n);
        if (x->agg == AG_PCT &&
            push_value(&m->run_vals[s], &m->run_nvals[s], &m->run_capvals[s], v.n))
            return TKP_ERR_NOMEM;
        /* top-k steps by value: the witnesses of a percentile or max bound */
        int k = a->witness, nt = m->run_ntop[s];
        struct tkp_witem *top = m->run_top[s];
        int at = nt < k ? nt : -1;
        if (at < 0)
            for (int i = 0; i < nt; i++)
                if (v.n > top[i].value && (at < 0 || top[i].value < top[at].value)) at = i;
        if (at >= 0) {
            memset(&top[at], 0, sizeof(top[at]));
            snprintf(top[at].role, sizeof(top[at].role), "step_top");
            top[at].value = v.n;
            top[at].r.step = E->s->idx;
            top[at].r.token = E->s->token;
            top[at].r.thread = E->s->thread;
            top[at].r.host_ns = E->s->start;
            if (nt < k) m->run_ntop[s]++;
        }
    }
    return 0;
}

void tkp_runs_finalize(struct tkp_mon *m)
{
    const struct tkp_spec *sp = m->sp;
    for (int s = 0; s < sp->nslots_run; s++) {
        const struct tkp_node *x = &sp->n[m->run_node[s]];
        double *acc = &m->run_acc[4 * s];
        struct tkp_val v = {VT_NUM, 0, NULL};
        switch (x->agg) {
        case AG_COUNT: v.n = acc[1]; break;
        case AG_EXISTS: v.t = VT_BOOL, v.n = acc[1] > 0; break;
        case AG_SUM: v.n = acc[0]; break;
        case AG_MEAN: v.n = acc[1] ? acc[0] / acc[1] : 0, v.t = acc[1] ? VT_NUM : VT_UNK; break;
        case AG_MIN: v.n = acc[2], v.t = acc[1] ? VT_NUM : VT_UNK; break;
        case AG_MAX: v.n = acc[3], v.t = acc[1] ? VT_NUM : VT_UNK; break;
        case AG_PCT:
            if (m->run_nvals[s]) v.n = pct_of(m->run_vals[s], m->run_nvals[s], x->num);
            else v.t = VT_UNK;
            break;
        default: v.t = VT_UNK;
        }
        if (m->run_unk[s]) v.t = VT_UNK;
        m->runs[s] = v;
    }
}
